"""The four node types every SQL connector offers (query, insert, update, upsert), made
for one database from its configs, dialect and statement runner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from connectors import sdk
from connectors.builtin.databases import sql
from connectors.builtin.databases.sql import (
    Dialect,
    QueryConfig,
    RowsOutput,
    Statement,
    WriteConfig,
)

__all__ = ["Runner", "SqlConnector", "database_actions", "query_statements", "sql_connector"]

Runner = Callable[..., Awaitable[RowsOutput]]
"""``await run(statements, transaction=, timeout=, max_rows=)`` on a fresh connection."""

Opener = Callable[[dict[str, Any], float], Awaitable[sql.Session]]
"""``await open(login, timeout)``: a session on a new connection with the step's login."""

WRITES: tuple[tuple[str, str, Callable[..., list[Statement]], str], ...] = (
    ("insert", "insert rows", sql.insert_statements, "Insert the rows into a table."),
    (
        "update",
        "update rows",
        sql.update_statements,
        "Update the rows matching the key columns.",
    ),
    (
        "upsert",
        "insert or update rows",
        sql.upsert_statements,
        "Insert the rows, updating those whose key columns already exist.",
    ),
)


def query_statements(config: QueryConfig) -> list[Statement]:
    """The statements a query config runs (once, or once per parameter set)."""
    if config.parameter_sets is not None:
        return [Statement(config.query, tuple(args)) for args in config.parameter_sets]
    return [Statement(config.query, tuple(config.parameters))]


@dataclass(frozen=True)
class SqlConnector:
    """The credential type and node types of one SQL database's connector."""

    credential_type: sdk.CredentialType
    actions: Sequence[sdk.ActionDefinition]

    def connector(self, name: str, label: str, description: str) -> sdk.Connector:
        return sdk.Connector(
            name=name,
            label=label,
            version="1.0.0",
            description=description,
            actions=list(self.actions),
            credential_types=[self.credential_type],
            icon="database",
        )


def sql_connector(
    prefix: str,
    label: str,
    *,
    server: str,
    port: int,
    dialect: Dialect,
    open_session: Opener,
    placeholders: str,
) -> SqlConnector:
    """The credential type ``<prefix>`` (a
    :class:`~connectors.builtin.databases.sql.DatabaseLoginFields` login, default
    ``port``) and the node types of :func:`database_actions` asking for it."""
    credential_type = sdk.credential_type(
        prefix,
        label=f"{server} database",
        kind="custom",
        fields=sql.DatabaseLoginFields,
        description=f"A {server} server login (host, database, user, TLS)",
        defaults={"port": port},
    )
    field = Annotated[str, sdk.credential_meta(prefix, title="Database")]
    configs: list[Any] = []
    for base, doc in ((QueryConfig, "query"), (WriteConfig, "insert, update and upsert")):
        config = msgspec.defstruct(
            f"{prefix.title()}{base.__name__}", [("credential", field)], bases=(base,), kw_only=True
        )
        config.__doc__ = f"Config of {prefix} {doc}: {base.__doc__}"
        configs.append(config)

    async def run(
        statements: Sequence[Statement], *, transaction: bool, timeout: float, max_rows: int
    ) -> RowsOutput:
        session = await open_session(sdk.credential("credential"), timeout)
        return await sql.run_statements(
            session, statements, transaction=transaction, timeout=timeout, max_rows=max_rows
        )

    actions = database_actions(
        prefix,
        label,
        query_config=configs[0],
        write_config=configs[1],
        dialect=dialect,
        run=run,
        placeholders=placeholders,
    )
    return SqlConnector(credential_type, actions)


def database_actions(
    prefix: str,
    label: str,
    *,
    query_config: type[QueryConfig],
    write_config: type[WriteConfig],
    dialect: Dialect,
    run: Runner,
    placeholders: str,
) -> Sequence[sdk.ActionDefinition]:
    """``[<prefix>.query, <prefix>.insert, <prefix>.update, <prefix>.upsert]``."""

    async def query(config: Any, input: Any) -> RowsOutput:
        return await run(
            query_statements(config),
            transaction=config.transaction,
            timeout=config.timeout,
            max_rows=config.max_rows,
        )

    definitions = [
        sdk.action(
            f"{prefix}.query",
            label=f"{label}: execute query",
            config=query_config,
            category="Databases",
            icon="database",
            description=f"Run a SQL statement with {placeholders} parameters; rows become items.",
            expression_fields=("query", "parameters", "parameter_sets"),
        )(query)
    ]
    for name, what, build, description in WRITES:
        definitions.append(
            sdk.action(
                f"{prefix}.{name}",
                label=f"{label}: {what}",
                config=write_config,
                category="Databases",
                icon="database",
                description=description,
                expression_fields=("items", "table", "schema", "columns", "key_columns"),
            )(_writer(build, dialect, run))
        )
    return definitions


def _writer(build: Callable[..., list[Statement]], dialect: Dialect, run: Runner) -> Any:
    async def write(config: Any, input: Any) -> RowsOutput:
        statements = build(dialect, config, sql.rows_of(config.items, input))
        return await run(
            statements, transaction=config.transaction, timeout=config.timeout, max_rows=10**6
        )

    return write
