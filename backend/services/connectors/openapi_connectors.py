"""Importing OpenAPI documents as connectors, listing them, and what a re-import changes.

An import reads the document (an upload, or a URL fetched through the SSRF guard with the
document size cap), builds its definition in a worker thread (:mod:`connectors.openapi`),
compares it with the latest stored version (:mod:`connectors.openapi.diff`) and stores a
new version unless nothing changed; ``dry_run`` only reports. The catalog is then
refreshed (:mod:`backend.services.connectors.openapi_catalog`), so the palette offers the
operations.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import httpx
import msgspec
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models.openapi import OpenApiConnector, OpenApiConnectorVersion
from backend.services import audit
from backend.services.connectors.catalog import CONNECTOR_NAME
from backend.services.outbound import ssrf_policy
from backend.settings import Settings
from connectors import sdk
from connectors.host.outbound import SsrfGuardTransport
from connectors.openapi.definition import ConnectorDefinition, Refusal, decode_definition
from connectors.openapi.diff import Changes, compare
from connectors.openapi.importer import build_definition
from connectors.openapi.loading import MAX_DOCUMENT_BYTES, DocumentRefused, load_document

IMPORT_SECONDS = 120.0
"""How long reading and converting one document may take (a 4 MB document takes ~5 s)."""
FETCH_SECONDS = 30.0
IMPORT_BODY_BYTES = 2 * MAX_DOCUMENT_BYTES + 1024 * 1024
"""The largest request body an import or a diff takes (the server's default is 10 MB): a
document of ``MAX_DOCUMENT_BYTES`` as a JSON string, where escapes (``\\n``, ``\\"``) can
double its size, or as an uploaded file. A larger document is refused after reading."""


class ImportRefused(ValueError):
    """The document or the request cannot be imported; ``field`` names the input at fault
    and ``where`` the place in the document (a JSON pointer or a line) when known."""

    def __init__(self, message: str, *, field: str | None = None, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.where = where


class ConnectorNotFound(LookupError):
    """No imported connector of that name."""


class OperationOut(msgspec.Struct):
    """An imported operation: its node type, node-type version and call."""

    node_type: str
    version: int
    label: str
    method: str
    path: str
    paginated: bool


class ImportResult(msgspec.Struct):
    """What an import did (or, with ``dry_run``, would do).

    ``version``: the stored version's number (the latest one when nothing changed;
    ``None`` for a dry run of a new connector); ``stored``: whether this import wrote a
    new version."""

    name: str
    label: str
    version: int | None
    stored: bool
    imported: int
    refused: list[Refusal]
    changes: Changes
    operations: list[OperationOut]
    credential_types: list[str]


class ConnectorVersionOut(msgspec.Struct):
    """One stored version of a connector: ``version`` its number (1, 2, ...)."""

    version: int
    document_sha256: str
    source_url: str
    imported: int
    refused: int
    changes: Changes
    created_at: datetime


class ConnectorOut(msgspec.Struct):
    """An imported connector with its latest operations and refusals, and its versions."""

    name: str
    label: str
    latest_version: int
    operations: list[OperationOut]
    refused: list[Refusal]
    versions: list[ConnectorVersionOut]


async def fetch_document(settings: Settings, url: str) -> bytes:
    """GET ``url`` through the SSRF guard, reading at most the document size cap.

    Raises :class:`ImportRefused` (field ``url``) for a refused, unreachable or failing URL."""
    if not url.startswith(("http://", "https://")):
        raise ImportRefused("the URL must start with http:// or https://", field="url")
    transport = SsrfGuardTransport(ssrf_policy(settings))
    try:
        async with (
            httpx.AsyncClient(transport=transport, timeout=FETCH_SECONDS) as client,
            client.stream("GET", url, headers={"Accept": "application/json, */*"}) as response,
        ):
            if response.status_code >= 400:
                raise ImportRefused(f"GET {url} answered HTTP {response.status_code}", field="url")
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > MAX_DOCUMENT_BYTES:
                    raise ImportRefused(
                        f"the document at {url} is larger than {MAX_DOCUMENT_BYTES:,} bytes",
                        field="url",
                    )
                chunks.append(chunk)
    except httpx.HTTPError as err:
        raise ImportRefused(f"GET {url} failed: {type(err).__name__}: {err}", field="url") from None
    except sdk.ActionError as err:  # the SSRF guard (private address, size cap)
        raise ImportRefused(f"GET {url} is refused: {err}", field="url") from None
    return b"".join(chunks)


def _read(
    data: bytes, name: str, label: str, variables: dict[str, str], source_url: str
) -> ConnectorDefinition:
    doc, version = load_document(data)
    return build_definition(
        doc,
        name=name,
        label=label,
        openapi_version=version,
        server_variables=variables,
        source_url=source_url,
    )


async def read_definition(
    data: bytes, *, name: str, label: str, variables: dict[str, str], source_url: str
) -> ConnectorDefinition:
    """The definition of ``data`` built in a worker thread (the event loop stays free).

    Raises :class:`ImportRefused` (field ``document``) with the reason and where."""
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(_read, data, name, label, variables, source_url), IMPORT_SECONDS
        )
    except DocumentRefused as err:
        raise ImportRefused(err.reason, field="document", where=err.where) from None
    except TimeoutError:
        raise ImportRefused(
            f"reading the document took longer than {IMPORT_SECONDS:g} s", field="document"
        ) from None


def _operations(definition: ConnectorDefinition, versions: dict[str, int]) -> list[OperationOut]:
    return [
        OperationOut(
            node_type=f"{definition.name}.{op.key}",
            version=versions.get(op.key, 1),
            label=op.label,
            method=op.method,
            path=op.path,
            paginated=op.pagination is not None,
        )
        for op in definition.operations
    ]


async def _connector_row(session: AsyncSession, name: str) -> OpenApiConnector | None:
    result = await session.execute(select(OpenApiConnector).where(OpenApiConnector.name == name))
    return result.scalar_one_or_none()


async def _versions(
    session: AsyncSession, connector_id: uuid.UUID
) -> list[OpenApiConnectorVersion]:
    result = await session.execute(
        select(OpenApiConnectorVersion)
        .where(OpenApiConnectorVersion.connector_id == connector_id)
        .order_by(OpenApiConnectorVersion.number)
    )
    return list(result.scalars())


def check_name(name: str, catalog: Any, row: OpenApiConnector | None) -> None:
    """``name`` can prefix node types and is not another connector's.

    Raises :class:`ImportRefused` (field ``name``)."""
    if not CONNECTOR_NAME.match(name):
        raise ImportRefused(
            "a connector's name is 1 to 40 lower-case letters, digits or underscores, "
            "starting with a letter",
            field="name",
        )
    if name in catalog.reserved_names():
        raise ImportRefused(f"the name {name} belongs to Railyard's core node types", field="name")
    info = catalog.connector(name)
    if row is None and info is not None:
        raise ImportRefused(f"the name {name} is taken by {info.who()}", field="name")


async def import_document(
    session: AsyncSession,
    catalog: Any,
    *,
    name: str,
    label: str,
    data: bytes,
    source_url: str = "",
    server_variables: dict[str, str] | None = None,
    user_id: uuid.UUID | None = None,
    dry_run: bool = False,
) -> ImportResult:
    """Import ``data`` as connector ``name`` (a new version when it changed).

    Raises :class:`ImportRefused` for a bad name or a document that cannot be imported.
    The caller commits, then refreshes the catalog."""
    row = await _connector_row(session, name)
    check_name(name, catalog, row)
    definition = await read_definition(
        data, name=name, label=label, variables=server_variables or {}, source_url=source_url
    )
    stored = await _versions(session, row.id) if row is not None else []
    latest = stored[-1] if stored else None
    highest: dict[str, int] = {}
    for version in stored:
        for key, number in version.operation_versions.items():
            highest[key] = max(highest.get(key, 0), int(number))
    previous = decode_definition(latest.definition) if latest is not None else None
    changes, versions = compare(
        previous, dict(latest.operation_versions) if latest else {}, highest, definition
    )
    sha = hashlib.sha256(data).hexdigest()
    unchanged = latest is not None and changes.empty and previous == definition
    result = ImportResult(
        name=name,
        label=definition.label,
        version=latest.number if latest is not None else None,
        stored=False,
        imported=len(definition.operations),
        refused=list(definition.refused),
        changes=changes,
        operations=_operations(definition, versions),
        credential_types=[c.type for c in definition.credentials],
    )
    if dry_run or unchanged:
        return result
    if row is None:
        row = OpenApiConnector(name=name, label=definition.label, created_by=user_id)
        session.add(row)
        await session.flush()
    row.label = definition.label
    number = latest.number + 1 if latest is not None else 1
    session.add(
        OpenApiConnectorVersion(
            connector_id=row.id,
            number=number,
            document_sha256=sha,
            document_gzip=gzip.compress(data, compresslevel=6),
            source_url=source_url,
            definition=msgspec.to_builtins(definition),
            operation_versions=versions,
            changes=msgspec.to_builtins(changes),
            created_by=user_id,
        )
    )
    await audit.record(
        session,
        "connector.import",
        "connector",
        name,
        actor_user_id=user_id,
        details={
            "version": number,
            "document_sha256": sha,
            "source_url": source_url,
            "imported": result.imported,
            "refused": len(result.refused),
            "added": len(changes.added),
            "changed": len(changes.changed),
            "removed": len(changes.removed),
        },
    )
    await session.flush()
    result.version, result.stored = number, True
    return result


async def list_connectors(session: AsyncSession) -> list[ConnectorOut]:
    """Every imported connector with its latest version's operations (versions listed)."""
    rows = (
        await session.execute(select(OpenApiConnector).order_by(OpenApiConnector.name))
    ).scalars()
    return [await _detail(session, row) for row in rows]


async def get_connector(session: AsyncSession, name: str) -> ConnectorOut:
    """One imported connector; raises :class:`ConnectorNotFound`."""
    row = await _connector_row(session, name)
    if row is None:
        raise ConnectorNotFound(name)
    return await _detail(session, row)


async def _detail(session: AsyncSession, row: OpenApiConnector) -> ConnectorOut:
    versions = await _versions(session, row.id)
    latest = versions[-1]
    definition = decode_definition(latest.definition)
    return ConnectorOut(
        name=row.name,
        label=row.label,
        latest_version=latest.number,
        operations=_operations(definition, dict(latest.operation_versions)),
        refused=list(definition.refused),
        versions=[
            ConnectorVersionOut(
                version=v.number,
                document_sha256=v.document_sha256,
                source_url=v.source_url,
                imported=len(v.definition.get("operations") or ()),
                refused=len(v.definition.get("refused") or ()),
                changes=msgspec.convert(v.changes, Changes),
                created_at=v.created_at,
            )
            for v in reversed(versions)
        ],
    )


async def stored_versions(
    session: AsyncSession,
) -> dict[str, list[tuple[ConnectorDefinition, dict[str, int]]]]:
    """Every connector's stored versions, oldest first: ``{name: [(definition, versions)]}``."""
    result = await session.execute(
        select(OpenApiConnector.name, OpenApiConnectorVersion)
        .join(OpenApiConnectorVersion, OpenApiConnectorVersion.connector_id == OpenApiConnector.id)
        .order_by(OpenApiConnector.name, OpenApiConnectorVersion.number)
    )
    found: dict[str, list[tuple[ConnectorDefinition, dict[str, int]]]] = {}
    for name, version in result.all():
        found.setdefault(name, []).append(
            (decode_definition(version.definition), dict(version.operation_versions))
        )
    return found


async def stored_marker(session: AsyncSession) -> tuple[int, datetime | None]:
    """``(count, newest created_at)`` of the stored versions: changes when one is added."""
    row = (
        await session.execute(select(func.count(), func.max(OpenApiConnectorVersion.created_at)))
    ).one()
    return int(row[0]), row[1]


async def import_and_install(
    sessionmaker: async_sessionmaker[AsyncSession],
    catalog: Any,
    *,
    announce: Callable[[], Awaitable[None]] | None = None,
    **kwargs: Any,
) -> ImportResult:
    """:func:`import_document` in a transaction of its own, committed before the catalog
    is refreshed (so the operations are in the palette when this returns) and before
    ``announce`` tells the other processes (:mod:`backend.services.connectors.openapi_catalog`)."""
    async with sessionmaker() as session, session.begin():
        result = await import_document(session, catalog, **kwargs)
    if result.stored:
        await catalog.refresh()
        if announce is not None:
            await announce()
    return result
