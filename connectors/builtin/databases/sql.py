"""What the PostgreSQL and MySQL/MariaDB connectors share: the login, TLS, the node
configs, building INSERT/UPDATE/upsert statements, and turning rows into JSON items.

Values always travel as statement parameters; only identifiers (table, schema, column
names) are written into the SQL, quoted by the dialect's rule (:meth:`Dialect.quote`:
``"name"`` for PostgreSQL, `` `name` `` for MySQL, an embedded quote character doubled),
so no item can change what a statement does.

Rows become JSON objects (column name -> value): integers, floats, text, booleans and
``null`` as they are; ``numeric``/``decimal`` values as text (no digit is lost); dates,
times and timestamps as ISO 8601 text; UUIDs as text; binary values as base64 text;
JSON columns as the JSON value; arrays as lists; anything else as its text form.
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal, Protocol, TypedDict

import msgspec

from connectors import sdk

__all__ = [
    "DatabaseLoginFields",
    "Dialect",
    "ExecuteConfig",
    "QueryConfig",
    "RowsOutput",
    "Session",
    "Statement",
    "WriteConfig",
    "dial_host",
    "insert_statements",
    "jsonable",
    "rows_of",
    "run_statements",
    "tls_context",
    "update_statements",
    "upsert_statements",
]

TlsMode = Literal["disable", "require", "verify-ca", "verify-full"]
TLS_LABELS = {
    "disable": "Off (plain connection)",
    "require": "Encrypt, do not check the certificate",
    "verify-ca": "Encrypt, check the certificate's issuer",
    "verify-full": "Encrypt, check the issuer and the host name",
}


class DatabaseLoginFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A database server login with its TLS settings.

    ``tls`` follows libpq's ``sslmode`` names: ``disable`` (no TLS), ``require`` (TLS,
    any certificate), ``verify-ca`` (the certificate must be issued by ``ca_certificate``
    or a system CA), ``verify-full`` (and name ``host``). ``client_certificate`` and
    ``client_key`` (PEM) log in with a client certificate where the server asks for one.
    """

    host: Annotated[str, msgspec.Meta(title="Host", min_length=1)]
    port: Annotated[int, msgspec.Meta(title="Port", ge=1, le=65535)]
    database: Annotated[str, msgspec.Meta(title="Database", min_length=1)]
    username: Annotated[str, msgspec.Meta(title="Username", min_length=1)]
    password: Annotated[str, sdk.secret("Password")] = ""
    tls: Annotated[
        TlsMode,
        msgspec.Meta(title="TLS", extra_json_schema={"x-enum-labels": TLS_LABELS}),
    ] = "verify-full"
    ca_certificate: Annotated[
        str,
        msgspec.Meta(
            title="CA certificate (PEM)",
            description="Trusted issuer(s); empty uses the system's CAs",
            extra_json_schema={"x-multiline": True},
        ),
    ] = ""
    client_certificate: Annotated[
        str, msgspec.Meta(title="Client certificate (PEM)", extra_json_schema={"x-multiline": True})
    ] = ""
    client_key: Annotated[str, sdk.secret("Client key (PEM)")] = ""


def tls_context(login: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The client TLS context for ``login``'s ``tls`` mode (``None`` for ``disable``).

    Raises ``sdk.ConfigError`` when a certificate or key is not valid PEM.
    """
    mode = login.get("tls", "verify-full")
    if mode == "disable":
        return None
    try:
        context = ssl.create_default_context(cadata=login.get("ca_certificate") or None)
        if not login.get("ca_certificate"):
            context.load_default_certs()
        if mode in ("require", "verify-ca"):
            context.check_hostname = False
        if mode == "require":
            context.verify_mode = ssl.CERT_NONE
        if login.get("client_certificate"):
            _load_client_pair(context, login["client_certificate"], login.get("client_key", ""))
    except (ssl.SSLError, ValueError) as err:
        raise sdk.ConfigError(
            f"the credential's TLS certificate or key is not valid: {err}"
        ) from None
    return context


def _load_client_pair(context: ssl.SSLContext, cert: str, key: str) -> None:
    # ssl loads a client certificate only from files: written for the call, then removed
    with tempfile.TemporaryDirectory(prefix="railyard-tls-") as directory:
        cert_path, key_path = os.path.join(directory, "c.pem"), os.path.join(directory, "k.pem")
        for path, text in ((cert_path, cert), (key_path, key or cert)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as handle:
                handle.write(text)
        context.load_cert_chain(cert_path, key_path)


async def dial_host(host: str, port: int, *, verify_name: bool) -> str:
    """Check ``host`` against the deployment's SSRF policy; return what to connect to.

    That is the first checked address, so a DNS answer that changes after the check
    cannot send the connection elsewhere, except when TLS checks the host name
    (``verify_name``): then the name, which the certificate is verified against. Raises
    ``sdk.NonRetryableError`` (kind ``ssrf_blocked``) or ``sdk.ActionError`` (kind
    ``dns_error``).
    """
    addresses = await sdk.current_context().ssrf.resolve_and_check(host, port)
    return host if verify_name or not addresses else str(addresses[0])


# -- node configs ----------------------------------------------------------------------

Items = Annotated[
    Any,
    msgspec.Meta(
        title="Rows",
        description="A list of objects (column -> value); defaults to the step input's items",
    ),
]
Transaction = Annotated[
    bool,
    msgspec.Meta(
        title="Execute in a transaction",
        description="All statements commit together or none does; off: each commits alone",
    ),
]
MaxRows = Annotated[int, msgspec.Meta(title="Row limit", ge=1, le=1_000_000)]
Timeout = Annotated[float, msgspec.Meta(title="Timeout (s)", gt=0, le=3600)]


class QueryConfig(msgspec.Struct, kw_only=True):
    """Run one SQL statement with parameters (values never go into the SQL text)."""

    credential: str
    query: Annotated[
        str,
        msgspec.Meta(title="SQL", min_length=1, extra_json_schema={"x-multiline": True}),
    ]
    parameters: Annotated[
        list[Any], msgspec.Meta(title="Parameters", description="Values of the placeholders")
    ] = []
    parameter_sets: Annotated[
        list[list[Any]] | None,
        msgspec.Meta(
            title="Parameter sets",
            description="Run the statement once per list of values (instead of Parameters)",
        ),
    ] = None
    transaction: Transaction = True
    max_rows: MaxRows = 10_000
    timeout: Timeout = 60.0


class WriteConfig(msgspec.Struct, kw_only=True):
    """Insert, update or upsert rows of a table."""

    credential: str
    table: Annotated[str, msgspec.Meta(title="Table", min_length=1)]
    schema: Annotated[
        str, msgspec.Meta(title="Schema", description="Empty: the connection's default")
    ] = ""
    items: Items = None
    columns: Annotated[
        list[str],
        msgspec.Meta(title="Columns", description="Empty: every key found in the rows"),
    ] = []
    key_columns: Annotated[
        list[str],
        msgspec.Meta(
            title="Key columns",
            description="Update and upsert: the columns that identify a row",
        ),
    ] = []
    transaction: Transaction = True
    timeout: Timeout = 60.0


ExecuteConfig = QueryConfig | WriteConfig


class RowsOutput(TypedDict):
    """What a database step gives: `items`, the rows the statement returned (one object
    per row, column -> value; a write returns the written rows where the database can),
    and `count`, the number of rows returned or affected."""

    items: list[dict[str, Any]]
    count: int


# -- statements ------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    """One SQL text with its parameter values."""

    sql: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Dialect:
    """How a database spells identifiers, placeholders, RETURNING and upserts.

    ``placeholder(n)`` is the n-th (1-based) parameter marker; ``returning`` says whether
    writes end with ``RETURNING *``; ``upsert`` is ``"on_conflict"`` (PostgreSQL) or
    ``"on_duplicate_key"`` (MySQL/MariaDB).
    """

    quote_char: str
    numbered: bool
    returning: bool
    upsert: Literal["on_conflict", "on_duplicate_key"]

    def quote(self, name: str) -> str:
        """``name`` as a quoted identifier; ``sdk.ConfigError`` when empty or holding NUL."""
        if not name or "\x00" in name or len(name) > 128:
            raise sdk.ConfigError(f"not a valid identifier: {name!r}")
        q = self.quote_char
        return q + name.replace(q, q + q) + q

    def table(self, schema: str, table: str) -> str:
        return f"{self.quote(schema)}.{self.quote(table)}" if schema else self.quote(table)

    def placeholder(self, n: int) -> str:
        return f"${n}" if self.numbered else "%s"


def rows_of(items: Any, input: Any) -> list[dict[str, Any]]:
    """The rows to write: ``items``, else the step input (its ``items`` list when it is an
    object holding one). Raises ``sdk.ConfigError`` unless every row is an object."""
    source = input if items is None else items
    if isinstance(source, dict) and items is None:
        source = source.get("items", [source])
    if isinstance(source, dict):
        source = [source]
    if not isinstance(source, list):
        raise sdk.ConfigError(f"rows must be a list of objects, got {type(source).__name__}")
    for index, row in enumerate(source):
        if not isinstance(row, dict):
            raise sdk.ConfigError(f"row {index} is {type(row).__name__}, not an object")
    return source


def _columns(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    if columns:
        return list(columns)
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    if not seen:
        raise sdk.ConfigError("the rows have no columns")
    return list(seen)


def insert_statements(
    d: Dialect, config: WriteConfig, rows: Sequence[dict[str, Any]]
) -> list[Statement]:
    """One ``INSERT`` per row (a missing key is ``NULL``)."""
    columns = _columns(rows, config.columns)
    names = ", ".join(d.quote(c) for c in columns)
    marks = ", ".join(d.placeholder(i + 1) for i in range(len(columns)))
    sql = f"INSERT INTO {d.table(config.schema, config.table)} ({names}) VALUES ({marks})"
    if d.returning:
        sql += " RETURNING *"
    return [Statement(sql, tuple(row.get(c) for c in columns)) for row in rows]


def _keys(config: WriteConfig, action: str) -> list[str]:
    if not config.key_columns:
        raise sdk.ConfigError(f"{action} needs key columns (the columns that identify a row)")
    return list(config.key_columns)


def update_statements(
    d: Dialect, config: WriteConfig, rows: Sequence[dict[str, Any]]
) -> list[Statement]:
    """One ``UPDATE ... SET <other columns> WHERE <key columns> = ...`` per row; a row
    missing a key column is a ``sdk.ConfigError``."""
    keys = _keys(config, "update")
    columns = [c for c in _columns(rows, config.columns) if c not in keys]
    if not columns:
        raise sdk.ConfigError("update has no columns to set besides the key columns")
    statements = []
    for index, row in enumerate(rows):
        missing = [k for k in keys if k not in row]
        if missing:
            raise sdk.ConfigError(f"row {index} lacks the key column(s) {missing}")
        present = [c for c in columns if c in row]
        if not present:
            continue
        sets = ", ".join(f"{d.quote(c)} = {d.placeholder(i + 1)}" for i, c in enumerate(present))
        where = " AND ".join(
            f"{d.quote(k)} = {d.placeholder(len(present) + i + 1)}" for i, k in enumerate(keys)
        )
        sql = f"UPDATE {d.table(config.schema, config.table)} SET {sets} WHERE {where}"
        if d.returning:
            sql += " RETURNING *"
        statements.append(
            Statement(sql, tuple(row[c] for c in present) + tuple(row[k] for k in keys))
        )
    return statements


def upsert_statements(
    d: Dialect, config: WriteConfig, rows: Sequence[dict[str, Any]]
) -> list[Statement]:
    """One insert-or-update per row: ``INSERT ... ON CONFLICT (<keys>) DO UPDATE`` on
    PostgreSQL (the keys need a unique index or constraint), ``INSERT ... ON DUPLICATE KEY
    UPDATE`` on MySQL/MariaDB (any unique key of the table decides)."""
    keys = _keys(config, "upsert")
    columns = _columns(rows, config.columns)
    for key in keys:
        if key not in columns:
            columns.append(key)
    others = [c for c in columns if c not in keys]
    names = ", ".join(d.quote(c) for c in columns)
    marks = ", ".join(d.placeholder(i + 1) for i in range(len(columns)))
    sql = f"INSERT INTO {d.table(config.schema, config.table)} ({names}) VALUES ({marks})"
    if d.upsert == "on_conflict":
        target = ", ".join(d.quote(k) for k in keys)
        if others:
            sets = ", ".join(f"{d.quote(c)} = EXCLUDED.{d.quote(c)}" for c in others)
            sql += f" ON CONFLICT ({target}) DO UPDATE SET {sets}"
        else:
            sql += f" ON CONFLICT ({target}) DO NOTHING"
    else:
        first = d.quote(others[0] if others else keys[0])
        sets = ", ".join(f"{d.quote(c)} = VALUES({d.quote(c)})" for c in others)
        sql += f" ON DUPLICATE KEY UPDATE {sets or f'{first} = {first}'}"
    if d.returning:
        sql += " RETURNING *"
    return [Statement(sql, tuple(row.get(c) for c in columns)) for row in rows]


# -- running ---------------------------------------------------------------------------


class Session(Protocol):
    """One open database connection, as :func:`run_statements` drives it. Every method
    raises ``sdk.ActionError`` (a server error, a lost connection) rather than the
    driver's own exceptions."""

    service: str

    async def begin(self) -> None: ...

    async def commit(self) -> None: ...

    async def rollback(self) -> None: ...

    async def execute(self, statement: Statement, limit: int) -> tuple[list[dict[str, Any]], int]:
        """The rows ``statement`` returned (JSON objects), at most ``limit + 1`` of them
        read from the server (so a result over the limit is never held whole), and the
        rows it returned or affected."""
        ...

    async def close(self) -> None: ...


async def run_statements(
    session: Session,
    statements: Sequence[Statement],
    *,
    transaction: bool,
    timeout: float,
    max_rows: int,
) -> RowsOutput:
    """Run ``statements`` in order on ``session``, then close it.

    With ``transaction`` they commit together and the first error rolls every one back;
    without, each commits alone and the first error stops the rest. More than
    ``max_rows`` rows returned raise ``sdk.NonRetryableError`` (kind ``too_many_rows``)
    once the row past the limit is read;
    not finishing within ``timeout`` seconds raises a retryable ``sdk.ActionError``
    (kind ``db_timeout``).
    """
    items: list[dict[str, Any]] = []
    count = 0
    try:
        async with asyncio.timeout(timeout):
            if transaction:
                await session.begin()
            try:
                for statement in statements:
                    rows, affected = await session.execute(statement, max_rows - len(items))
                    items.extend(rows)
                    count += affected
                    if len(items) > max_rows:
                        raise sdk.NonRetryableError(
                            f"the statements returned more than {max_rows} rows; add a LIMIT "
                            "or raise the row limit",
                            kind="too_many_rows",
                        )
                if transaction:
                    await session.commit()
            except BaseException:
                if transaction:
                    await asyncio.shield(_quietly(session.rollback()))
                raise
    except TimeoutError:
        raise sdk.ActionError(
            f"{session.service}: the statements did not finish within {timeout:g} s",
            kind="db_timeout",
        ) from None
    finally:
        await session.close()
    return {"items": items, "count": count}


async def _quietly(work: Any) -> None:
    try:
        async with asyncio.timeout(5):
            await work
    except Exception:  # the connection is closed next; the server rolls back then
        return


# -- results ---------------------------------------------------------------------------


def jsonable(value: Any) -> Any:
    """One database value as JSON (see the module docstring)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)
