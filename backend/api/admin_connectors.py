"""``/api/v1/admin/connectors``: import OpenAPI documents as connectors, list them, and see
what a new document would change. Admin only (``connectors:manage``).

The document comes as text in the body (``document``, JSON or YAML) or is fetched from
``url`` through the SSRF guard. Errors (problem details, docs/api.md): 400 naming the
``field`` (``name``, ``document``, ``url``) for a document or name that cannot be
imported, the ``detail`` ending with the place in the document (``(at /paths/~1items)``,
``(at line 3, column 4)``) when known; 404 for an unknown connector
(docs/connectors.md, "OpenAPI connectors").
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, JSONBody

from backend.api.errors import problem_response
from backend.api.list_schemas import ConnectorList
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, listed
from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services.connectors import openapi_connectors as svc
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import access_dependencies

MANAGE = {"permission": Permission.CONNECTORS_MANAGE}
ConnectorName = Annotated[str, msgspec.Meta(pattern=r"^[a-z][a-z0-9_]{0,39}$")]


class ImportIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of an import: the connector's ``name`` (it prefixes the node types), an
    optional ``label`` (default: the document's title), the document as text or its
    ``url``, values of the first server's variables, and ``dry_run`` (report only)."""

    name: ConnectorName
    label: Annotated[str, msgspec.Meta(max_length=200)] = ""
    document: str | None = None
    url: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    server_variables: dict[str, str] = {}
    dry_run: bool = False


class DiffIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of a diff: a new document for an imported connector, as text or URL."""

    document: str | None = None
    url: Annotated[str, msgspec.Meta(max_length=2000)] | None = None
    server_variables: dict[str, str] = {}


def _refused(request: Request[Any, Any, Any], exc: svc.ImportRefused) -> Response[bytes]:
    detail = f"{exc.message} (at {exc.where})" if exc.where else exc.message
    return problem_response(request, 400, detail, field=exc.field)


def _not_found(request: Request[Any, Any, Any], exc: svc.ConnectorNotFound) -> Response[bytes]:
    return problem_response(request, 404, f"no imported connector named {exc.args[0]}")


async def document_bytes(runtime: Runtime, document: str | None, url: str | None) -> bytes:
    """The document given as text or fetched from ``url`` (exactly one of them).

    Raises :class:`svc.ImportRefused`."""
    if document is None and url is None:
        raise svc.ImportRefused("give the document as text or its url", field="document")
    if document is not None and url is not None:
        raise svc.ImportRefused("give the document as text or its url, not both", field="document")
    if document is not None:
        return document.encode()
    return await svc.fetch_document(runtime.settings, str(url))


async def run_import(runtime: Runtime, user_id: Any, data: ImportIn) -> svc.ImportResult:
    """Import (committed), then put the connector in this process's catalog."""
    raw = await document_bytes(runtime, data.document, data.url)
    return await svc.import_and_install(
        runtime.sessionmaker,
        runtime.catalog,
        announce=runtime.catalog_watch.announce,
        name=data.name,
        label=data.label,
        data=raw,
        source_url=data.url or "",
        server_variables=data.server_variables,
        user_id=user_id,
        dry_run=data.dry_run,
    )


class ConnectorAdminController(Controller):
    """Imported OpenAPI connectors."""

    path = "/api/v1/admin/connectors"
    tags = ["connectors"]
    dependencies = access_dependencies()
    exception_handlers = {svc.ImportRefused: _refused, svc.ConnectorNotFound: _not_found}

    @get("/", operation_id="list_imported_connectors", opt=MANAGE)
    async def list_connectors(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> ConnectorList:
        """Every imported connector: latest operations, refused operations, versions."""
        found = await svc.list_connectors(db)
        return listed(
            request,
            ConnectorList,
            found,
            lambda c: (c.name,),
            tuple[str],
            cursor=cursor,
            limit=limit,
        )

    @post(
        "/",
        operation_id="import_connector",
        opt=MANAGE,
        request_max_body_size=svc.IMPORT_BODY_BYTES,
    )
    async def import_connector(
        self, runtime: AppRuntime, user: CurrentUser, data: JSONBody[ImportIn]
    ) -> svc.ImportResult:
        """Import a document as a connector, or as a new version of it (201; with
        ``dry_run`` nothing is stored)."""
        return await run_import(runtime, user.id, data)

    @get("/{connector_name:str}", operation_id="get_imported_connector", opt=MANAGE)
    async def get_connector(self, db: DbSession, connector_name: FromPath[str]) -> svc.ConnectorOut:
        """One imported connector."""
        return await svc.get_connector(db, connector_name)

    @post(
        "/{connector_name:str}/diff",
        operation_id="diff_imported_connector",
        opt=MANAGE,
        request_max_body_size=svc.IMPORT_BODY_BYTES,
        status_code=200,
    )
    async def diff(
        self,
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        connector_name: FromPath[str],
        data: JSONBody[DiffIn],
    ) -> svc.ImportResult:
        """What importing ``document`` for the connector would change (nothing stored)."""
        current = await svc.get_connector(db, connector_name)
        request = ImportIn(
            name=connector_name,
            label=current.label,
            document=data.document,
            url=data.url,
            server_variables=data.server_variables,
            dry_run=True,
        )
        return await run_import(runtime, user.id, request)
