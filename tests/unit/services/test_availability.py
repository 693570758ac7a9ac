"""Which errors mean "PostgreSQL / Redis is unreachable" (503), and which are bugs (500)."""

from __future__ import annotations

import asyncpg
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from sqlalchemy.exc import DBAPIError, IntegrityError

from backend.services.availability import (
    database_unavailable,
    redis_unavailable,
    unavailable_service,
)


class AdapterError(Exception):
    """Stands for SQLAlchemy's asyncpg adapter exception (``DBAPIError.orig``)."""


def raised_from(error: BaseException, cause: BaseException) -> BaseException:
    try:
        try:
            raise cause
        except BaseException as inner:
            raise error from inner
    except BaseException as outer:
        return outer


def sqlalchemy_error(driver_error: BaseException) -> DBAPIError:
    """A DBAPIError as SQLAlchemy raises it over asyncpg: the asyncpg error sits in the
    ``__cause__`` of the adapter's exception, which is ``orig``."""
    adapted = raised_from(AdapterError("adapted"), driver_error)
    return DBAPIError("select 1", {}, adapted)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "driver_error",
    [
        asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
        asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator"),
        asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
        asyncpg.exceptions.TooManyConnectionsError("too many clients"),
        ConnectionRefusedError(111, "Connect call failed"),
    ],
)
def test_an_outage_deep_in_the_chain_is_found(driver_error: BaseException) -> None:
    error = sqlalchemy_error(driver_error)
    assert not isinstance(error.orig, type(driver_error))  # not where `orig` looks
    assert database_unavailable(error)
    assert unavailable_service(raised_from(RuntimeError("in a service"), error)) == "database"


def test_a_data_error_is_a_bug_not_an_outage() -> None:
    error = sqlalchemy_error(asyncpg.exceptions.UntranslatableCharacterError("\\u0000"))
    assert not database_unavailable(error)
    assert unavailable_service(IntegrityError("insert", {}, AdapterError("dup"))) is None
    assert unavailable_service(ValueError("bug")) is None


def test_redis_errors_are_redis_not_database() -> None:
    error = raised_from(RedisConnectionError("Connection refused"), ConnectionRefusedError(111))
    assert redis_unavailable(error)
    assert not database_unavailable(error)
    assert unavailable_service(error) == "redis"


def test_a_cyclic_chain_ends() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    assert unavailable_service(a) is None
