"""Built-in PostgreSQL connector (asyncpg): ``postgres.query``, ``postgres.insert``,
``postgres.update``, ``postgres.upsert``.

Each attempt opens one connection with the ``postgres`` credential (host, port,
database, login, TLS per :class:`~connectors.builtin.databases.sql.DatabaseLoginFields`),
after the host passed the deployment's SSRF policy, and closes it at the end.

- ``postgres.query`` runs one statement with ``$1, $2, ...`` placeholders and the values
  of ``parameters`` (or once per list in ``parameter_sets``). A statement without
  parameters may hold several commands separated by ``;`` (a script; it returns no
  rows). Each value is converted to the type PostgreSQL expects for its placeholder:
  ISO 8601 text for dates, times and timestamps (a timestamp without offset is UTC for
  ``timestamptz``), text or numbers for ``numeric``, integers and floats, text for
  ``uuid``, any JSON value for ``json``/``jsonb``, base64 text for ``bytea``, lists for
  arrays. A value that cannot be converted fails the step naming the placeholder.
- ``insert`` / ``update`` / ``upsert`` write ``items`` (default: the step input's items)
  into ``table``, returning the written rows (``RETURNING *``). ``upsert`` needs a unique
  index or constraint on ``key_columns`` (``ON CONFLICT``).
- **Execute in a transaction** (``transaction``, default on): every statement of the
  step commits together, and the first error rolls all of them back. Off: each
  statement commits on its own and the first error stops the step (earlier ones stay).

Output: ``{"items": [rows...], "count": n}`` (:class:`~connectors.builtin.databases.sql.RowsOutput`;
``count`` is the number of rows returned, or affected when a statement returns none).
More rows than ``max_rows`` fail the step (kind ``too_many_rows``).

Errors (``details`` carry ``sqlstate``, ``detail``, ``hint``, ``position``): a server
error is a step error of kind ``sql_<class>`` by SQLSTATE class: ``sql_syntax`` (42:
syntax, unknown table or column, permission), ``sql_constraint`` (23),
``sql_data`` (22), ``sql_auth`` (28: wrong password), all not retryable;
serialization failures and deadlocks (40), too many connections and resource errors
(53, 57P03, 08) are retryable (``sql_transaction``, ``sql_unavailable``). A host that
refuses or does not answer is a retryable ``db_connect``; a statement running over
``timeout`` is cancelled on the server and is a retryable ``db_timeout``.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import ssl
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import asyncpg

from connectors import sdk
from connectors.builtin.databases import sql
from connectors.builtin.databases.actions import sql_connector
from connectors.builtin.databases.sql import Statement

__all__ = ["POSTGRES", "connector"]

DIALECT = sql.Dialect(quote_char='"', numbered=True, returning=True, upsert="on_conflict")

# -- parameter conversion --------------------------------------------------------------

_INTS = {"int2", "int4", "int8", "oid"}
_FLOATS = {"float4", "float8"}
_TEXT = {"text", "varchar", "bpchar", "name", "char", "citext"}


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a boolean is not an integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int | str):
        return int(value)
    raise ValueError


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in (
        "true",
        "t",
        "yes",
        "1",
        "false",
        "f",
        "no",
        "0",
    ):
        return value.lower() in ("true", "t", "yes", "1")
    if isinstance(value, int):
        return bool(value)
    raise ValueError


def _to_timestamp(value: Any, aware: bool) -> datetime:
    if isinstance(value, int | float) and not isinstance(value, bool):
        moment = datetime.fromtimestamp(value, UTC)
    else:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if aware and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    if not aware and moment.tzinfo is not None:
        return moment.astimezone(UTC).replace(tzinfo=None)
    return moment


def _to_bytes(value: Any) -> bytes:
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        value = value["base64"]
    if isinstance(value, str):
        return base64.b64decode(value, validate=True)
    raise ValueError


def _convert(value: Any, type_name: str, kind: str) -> Any:
    """``value`` (JSON) as the Python value asyncpg encodes for ``type_name``."""
    if value is None:
        return None
    if kind == "array" or type_name.startswith("_"):
        if not isinstance(value, list):
            raise ValueError("expected a list")
        return [_convert(v, type_name.lstrip("_"), "scalar") for v in value]
    if type_name in _INTS:
        return _to_int(value)
    if type_name in _FLOATS:
        return float(value)
    if type_name == "numeric":
        return Decimal(str(value))
    if type_name == "bool":
        return _to_bool(value)
    if type_name in _TEXT:
        return value if isinstance(value, str) else json.dumps(value)
    if type_name in ("timestamp", "timestamptz"):
        return _to_timestamp(value, aware=type_name == "timestamptz")
    if type_name == "date":
        return date.fromisoformat(str(value)[:10]) if isinstance(value, str) else value
    if type_name in ("time", "timetz"):
        return time.fromisoformat(str(value))
    if type_name == "interval":
        return timedelta(seconds=float(value))
    if type_name == "uuid":
        return uuid.UUID(str(value))
    if type_name == "bytea":
        return _to_bytes(value)
    return value  # json/jsonb through the connection's codec; others as asyncpg takes them


def _arguments(
    statement: asyncpg.prepared_stmt.PreparedStatement, args: Sequence[Any]
) -> list[Any]:
    params = statement.get_parameters()
    if len(args) != len(params):
        raise sdk.NonRetryableError(
            f"the statement has {len(params)} placeholder(s) but {len(args)} value(s) were given",
            kind="sql_parameters",
        )
    converted = []
    for index, (value, param) in enumerate(zip(args, params, strict=True), start=1):
        try:
            converted.append(_convert(value, param.name, param.kind))
        except (ValueError, TypeError, InvalidOperation, binascii.Error, OverflowError):
            raise sdk.NonRetryableError(
                f"parameter ${index}: {json.dumps(value)[:80]} is not a valid {param.name}",
                kind="sql_parameters",
                details={"parameter": index, "type": param.name},
            ) from None
    return converted


# -- errors ----------------------------------------------------------------------------

_RETRYABLE_CLASSES = {"08": "sql_unavailable", "40": "sql_transaction", "53": "sql_unavailable"}
_CLASSES = {
    "42": "sql_syntax",
    "23": "sql_constraint",
    "22": "sql_data",
    "28": "sql_auth",
    "3D": "sql_auth",
    "25": "sql_transaction",
}


def _server_error(err: asyncpg.PostgresError) -> sdk.ActionError:
    state = str(getattr(err, "sqlstate", "") or "")
    details = {
        "sqlstate": state,
        "detail": getattr(err, "detail", None),
        "hint": getattr(err, "hint", None),
        "position": getattr(err, "position", None),
    }
    message = f"PostgreSQL: {getattr(err, 'message', None) or err} (SQLSTATE {state})"
    if state[:2] in _RETRYABLE_CLASSES or state in ("57P03", "57P01"):
        kind = _RETRYABLE_CLASSES.get(state[:2], "sql_unavailable")
        return sdk.ActionError(message, kind=kind, details=details)
    return sdk.NonRetryableError(
        message, kind=_CLASSES.get(state[:2], "sql_error"), details=details
    )


def _connect_error(login: dict[str, Any], err: BaseException) -> sdk.ActionError:
    where = f"{login['host']}:{login['port']}"
    if isinstance(err, asyncpg.PostgresError):
        return _server_error(err)
    if isinstance(err, ssl.SSLError | ssl.CertificateError) or "rejected SSL" in str(err):
        return sdk.NonRetryableError(f"TLS with PostgreSQL at {where} failed: {err}", kind="db_tls")
    if isinstance(err, TimeoutError):
        return sdk.ActionError(f"PostgreSQL at {where} did not answer in time", kind="db_connect")
    return sdk.ActionError(
        f"cannot connect to PostgreSQL at {where}: {type(err).__name__}: {err}",
        kind="db_connect",
    )


# -- execution -------------------------------------------------------------------------


async def _connect(login: dict[str, Any], timeout: float) -> asyncpg.Connection:
    context = sql.tls_context(login)
    port = int(login["port"])
    host = await sql.dial_host(login["host"], port, verify_name=login.get("tls") == "verify-full")
    try:
        conn: asyncpg.Connection = await asyncpg.connect(
            host=host,
            port=port,
            user=login["username"],
            password=login.get("password") or None,
            database=login["database"],
            ssl=context if context is not None else False,
            timeout=min(timeout, 30.0),
            statement_cache_size=0,
            server_settings={"application_name": "railyard"},
        )
        for name in ("json", "jsonb"):
            await conn.set_type_codec(
                name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
            )
    except (asyncpg.PostgresError, OSError, TimeoutError, asyncpg.InterfaceError) as err:
        raise _connect_error(login, err) from None
    return conn


class PostgresSession:
    """One connection, speaking :class:`~connectors.builtin.databases.sql.Session`."""

    service = "PostgreSQL"

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self._tx: Any = None

    async def begin(self) -> None:
        self._tx = self.conn.transaction()
        await self._guard(self._tx.start())

    async def commit(self) -> None:
        await self._guard(self._tx.commit())

    async def rollback(self) -> None:
        if self._tx is not None and not self.conn.is_closed():
            await self._tx.rollback()

    async def execute(self, statement: Statement, limit: int) -> tuple[list[dict[str, Any]], int]:
        return await self._guard(self._execute(statement, limit))  # type: ignore[no-any-return]

    async def _execute(self, statement: Statement, limit: int) -> tuple[list[dict[str, Any]], int]:
        prepared = await self._prepare(statement)
        if prepared is None:  # a script of several commands
            return [], _affected(await self.conn.execute(statement.sql))
        args = _arguments(prepared, statement.args)
        if not prepared.get_attributes():
            await prepared.fetch(*args)
            return [], _affected(prepared.get_statusmsg())
        # rows come through a cursor (a portal read limit + 1 rows at a time); a cursor
        # lives in a transaction, and one around a single statement is what autocommit is
        if self.conn.is_in_transaction():
            records = await (await prepared.cursor(*args)).fetch(limit + 1)
        else:
            async with self.conn.transaction():
                records = await (await prepared.cursor(*args)).fetch(limit + 1)
        rows = [{key: sql.jsonable(value) for key, value in r.items()} for r in records]
        return rows, len(rows)

    async def _prepare(self, statement: Statement) -> Any:
        """The prepared statement, or ``None`` for a script (several commands, no
        parameters), which only the simple query protocol runs. The attempt to prepare a
        script runs in a savepoint, so its failure leaves the step's transaction usable."""
        if statement.args or ";" not in statement.sql.strip().rstrip(";"):
            return await self.conn.prepare(statement.sql)
        try:
            async with self.conn.transaction():
                return await self.conn.prepare(statement.sql)
        except asyncpg.PostgresSyntaxError as err:
            if "multiple commands" not in str(err):
                raise
            return None

    async def _guard(self, work: Any) -> Any:
        try:
            return await work
        except asyncpg.PostgresError as err:
            raise _server_error(err) from None
        except (OSError, asyncpg.InterfaceError) as err:
            raise sdk.ActionError(
                f"the connection to PostgreSQL failed: {type(err).__name__}: {err}",
                kind="db_connect",
            ) from None

    async def close(self) -> None:
        if self.conn.is_closed():
            return
        try:
            await asyncio.wait_for(self.conn.close(), 5)
        except (OSError, TimeoutError, asyncpg.InterfaceError):
            self.conn.terminate()


def _affected(status: str | None) -> int:
    last = (status or "").rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


async def open_session(login: dict[str, Any], timeout: float) -> PostgresSession:
    """A session on a new connection with ``login`` (the step's credential)."""
    return PostgresSession(await _connect(login, timeout))


SQL = sql_connector(
    "postgres",
    "PostgreSQL",
    server="PostgreSQL",
    port=5432,
    dialect=DIALECT,
    open_session=open_session,
    placeholders="$1, $2 ...",
)
POSTGRES = SQL.credential_type
query, insert, update, upsert = SQL.actions

connector = SQL.connector("postgres", "PostgreSQL", "Query and write PostgreSQL databases")
