"""Fixtures of the broker trigger tests: one :class:`~tests.integration.brokers.cases.BrokerCase`
per broker (``redis_case``, ``amqp_case``, ``mqtt_case``, ``nats_case``), on the servers of
tests/broker_servers.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.brokers.cases import AmqpCase, BrokerCase, MqttCase, NatsCase, RedisCase


def _case(cls: type[BrokerCase], server_fixture: str) -> Any:
    @pytest.fixture
    def case(request: pytest.FixtureRequest) -> BrokerCase:
        return cls(request.getfixturevalue(server_fixture))

    return case


redis_case = _case(RedisCase, "streams_redis_server")
amqp_case = _case(AmqpCase, "rabbitmq_server")
mqtt_case = _case(MqttCase, "mosquitto_server")
nats_case = _case(NatsCase, "nats_server")
