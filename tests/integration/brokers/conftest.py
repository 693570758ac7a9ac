"""Fixtures of the broker trigger tests: one :class:`~tests.integration.brokers.cases.BrokerCase`
per broker, on the servers of tests/broker_servers.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.brokers.cases import AmqpCase, MqttCase, NatsCase, RedisCase


@pytest.fixture
def redis_case(streams_redis_server: Any) -> RedisCase:
    return RedisCase(streams_redis_server)


@pytest.fixture
def amqp_case(rabbitmq_server: Any) -> AmqpCase:
    return AmqpCase(rabbitmq_server)


@pytest.fixture
def mqtt_case(mosquitto_server: Any) -> MqttCase:
    return MqttCase(mosquitto_server)


@pytest.fixture
def nats_case(nats_server: Any) -> NatsCase:
    return NatsCase(nats_server)
