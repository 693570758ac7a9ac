"""Built-in MySQL/MariaDB connector (asyncmy): ``mysql.query``, ``mysql.insert``,
``mysql.update``, ``mysql.upsert``.

The same node types as PostgreSQL's (docs in :mod:`connectors.builtin.databases.postgres`)
with MySQL's spelling: placeholders are ``%s`` (write ``%%`` for a literal ``%`` in a
statement that has parameters), identifiers are quoted with backticks, ``upsert`` is
``INSERT ... ON DUPLICATE KEY UPDATE`` (any unique key of the table decides; the key
columns are written like the others). A statement runs alone (no scripts). Objects and
lists given as parameters are sent as JSON text; dates as ISO 8601 text.

Writes return no rows (MySQL has no ``RETURNING``): ``count`` is the number of rows
affected (MySQL counts an upsert that updated a row as 2), and ``items`` holds
``{"insert_id": n}`` for each insert that generated an ``AUTO_INCREMENT`` value.

Errors by MySQL error number (``details.code``): ``sql_syntax`` (1064 syntax, 1146
unknown table, 1054 unknown column, 1142/1044 denied), ``sql_constraint`` (1062
duplicate key, 1451/1452 foreign key, 1048/1364 missing value), ``sql_data`` (1264,
1292, 1366, 1406: a value that does not fit), ``sql_auth`` (1045 wrong login, 1049
unknown database): not retryable; deadlocks and lock timeouts (1213, 1205,
``sql_transaction``) and too many connections (1040, ``sql_unavailable``) are retryable,
as are lost connections (``db_connect``, 2002-2013) and ``db_timeout``. TLS failures are
``db_tls``.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import asyncmy
import asyncmy.errors

from connectors import sdk
from connectors.builtin.databases import sql
from connectors.builtin.databases.actions import sql_connector
from connectors.builtin.databases.sql import Statement

__all__ = ["MYSQL", "connector"]

DIALECT = sql.Dialect(quote_char="`", numbered=False, returning=False, upsert="on_duplicate_key")

_KINDS = {
    "sql_syntax": {1064, 1146, 1054, 1142, 1044, 1143, 1227, 1149, 1109},
    "sql_constraint": {1062, 1451, 1452, 1048, 1364, 1216, 1217, 1557, 1586},
    "sql_data": {1264, 1292, 1366, 1406, 1265, 1411, 1367},
    "sql_auth": {1045, 1049, 1698},
}
_RETRYABLE = {1213: "sql_transaction", 1205: "sql_transaction", 1040: "sql_unavailable"}
_CONNECTION = set(range(2000, 2100))


def _error(err: BaseException, where: str) -> sdk.ActionError:
    """A driver exception as a step error (see the module docstring)."""
    code = err.args[0] if err.args and isinstance(err.args[0], int) else 0
    text = err.args[1] if len(err.args) > 1 else str(err)
    details = {"code": code}
    if code in _RETRYABLE:
        return sdk.ActionError(f"MySQL: {text} ({code})", kind=_RETRYABLE[code], details=details)
    if code in _CONNECTION or isinstance(err, OSError):
        return sdk.ActionError(
            f"the connection to MySQL at {where} failed: {text}", kind="db_connect", details=details
        )
    for kind, codes in _KINDS.items():
        if code in codes:
            return sdk.NonRetryableError(f"MySQL: {text} ({code})", kind=kind, details=details)
    return sdk.NonRetryableError(f"MySQL: {text} ({code})", kind="sql_error", details=details)


def _argument(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


class MysqlSession:
    """One connection, speaking :class:`~connectors.builtin.databases.sql.Session`."""

    service = "MySQL"

    def __init__(self, conn: Any, where: str) -> None:
        self.conn = conn
        self.where = where
        self._abandoned = False

    async def begin(self) -> None:
        await self._guard(self.conn.begin())

    async def commit(self) -> None:
        await self._guard(self.conn.commit())

    async def rollback(self) -> None:
        if self._abandoned:  # close() drops the connection; the server rolls back then
            return
        await self.conn.rollback()

    async def execute(self, statement: Statement, limit: int) -> tuple[list[dict[str, Any]], int]:
        return await self._guard(self._execute(statement, limit))  # type: ignore[no-any-return]

    async def _execute(self, statement: Statement, limit: int) -> tuple[list[dict[str, Any]], int]:
        args = tuple(_argument(v) for v in statement.args) if statement.args else None
        # an unbuffered cursor: at most limit + 1 rows are read; a result over the limit is
        # left unread and the connection closed hard (close() would read the rest)
        cursor = self.conn.cursor(asyncmy.cursors.SSDictCursor)
        affected = await cursor.execute(statement.sql, args)
        if cursor.description:
            records = await cursor.fetchmany(limit + 1)
            if len(records) > limit:
                self._abandoned = True
            else:
                await cursor.close()
            rows = [{k: sql.jsonable(v) for k, v in r.items()} for r in records]
            return rows, len(rows)
        await cursor.close()
        inserted = [{"insert_id": cursor.lastrowid}] if cursor.lastrowid else []
        return inserted, int(affected or 0)

    async def _guard(self, work: Any) -> Any:
        try:
            return await work
        except (asyncmy.errors.MySQLError, OSError) as err:
            raise _error(err, self.where) from None
        except (TypeError, ValueError) as err:  # parameters that do not fill the placeholders
            raise sdk.NonRetryableError(
                f"MySQL: the parameters do not match the statement's %s placeholders: {err}",
                kind="sql_parameters",
            ) from None

    async def close(self) -> None:
        if self._abandoned:  # a result is still streaming in: drop the connection
            self.conn.close()
            return
        try:
            await asyncio.wait_for(self.conn.ensure_closed(), 5)
        except (OSError, TimeoutError, asyncmy.errors.MySQLError):
            self.conn.close()


async def _connect(login: dict[str, Any], timeout: float) -> Any:
    context = sql.tls_context(login)
    port = int(login["port"])
    host = await sql.dial_host(login["host"], port, verify_name=login.get("tls") == "verify-full")
    where = f"{login['host']}:{port}"
    try:
        return await asyncio.wait_for(
            asyncmy.connect(
                host=host,
                port=port,
                user=login["username"],
                password=login.get("password") or "",
                database=login["database"],
                ssl=context,
                connect_timeout=min(timeout, 30.0),
                autocommit=True,
                charset="utf8mb4",
                program_name="railyard",
            ),
            min(timeout, 30.0) + 1,
        )
    except (ssl.SSLError, ssl.CertificateError) as err:
        raise sdk.NonRetryableError(
            f"TLS with MySQL at {where} failed: {err}", kind="db_tls"
        ) from None
    except TimeoutError:
        raise sdk.ActionError(
            f"MySQL at {where} did not answer in time", kind="db_connect"
        ) from None
    except (asyncmy.errors.MySQLError, OSError) as err:
        cause = err.__context__ or err.__cause__
        if isinstance(cause, ssl.SSLError | ssl.CertificateError):
            raise sdk.NonRetryableError(
                f"TLS with MySQL at {where} failed: {cause}", kind="db_tls"
            ) from None
        raise _error(err, where) from None


async def open_session(login: dict[str, Any], timeout: float) -> MysqlSession:
    """A session on a new connection with ``login`` (the step's credential)."""
    return MysqlSession(await _connect(login, timeout), f"{login['host']}:{login['port']}")


SQL = sql_connector(
    "mysql",
    "MySQL",
    server="MySQL / MariaDB",
    port=3306,
    dialect=DIALECT,
    open_session=open_session,
    placeholders="%s",
)
MYSQL = SQL.credential_type
query, insert, update, upsert = SQL.actions

connector = SQL.connector("mysql", "MySQL / MariaDB", "Query and write MySQL and MariaDB databases")
