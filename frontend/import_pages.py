"""``/admin/connectors``: import an OpenAPI document as a connector (an uploaded file or a
URL), see what it imported, refused and changed, and each imported connector's
operations, refusals and versions. Admins (``connectors:manage``); rendered through
``backend.services`` only (docs/connectors.md, "OpenAPI connectors").
"""

from __future__ import annotations

import uuid
from typing import Any

from litestar import Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.params import FromPath, MultipartBody

from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services.connectors import openapi_connectors as svc
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import CurrentPrincipal
from frontend.rendering import LoginRequiredPages, render

MANAGE = {"permission": Permission.CONNECTORS_MANAGE}


async def _document(runtime: Runtime, form: dict[str, Any]) -> tuple[bytes, str]:
    """The uploaded file or the document at the form's URL, and that URL (or ``""``)."""
    upload = form.get("file")
    url = str(form.get("url") or "").strip()
    if isinstance(upload, UploadFile) and upload.filename:
        if url:
            raise svc.ImportRefused("upload a file or give a URL, not both", field="url")
        return await upload.read(), ""
    if not url:
        raise svc.ImportRefused("upload the document or give its URL", field="file")
    return await svc.fetch_document(runtime.settings, url), url


class ImportPages(LoginRequiredPages):
    """Imported OpenAPI connectors (admins)."""

    async def _page(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        *,
        result: svc.ImportResult | None = None,
        error: svc.ImportRefused | None = None,
        form: dict[str, Any] | None = None,
    ) -> Response[str]:
        return render(
            request,
            "admin_connectors.html",
            status_code=400 if error else 200,
            connectors=await svc.list_connectors(db),
            result=result,
            error=error,
            form=form or {},
        )

    @get("/admin/connectors", operation_id="page_admin_connectors", opt=MANAGE)
    async def connectors_page(
        self, request: Request[Any, Any, Any], db: DbSession
    ) -> Response[str]:
        """The import form and every imported connector."""
        return await self._page(request, db)

    @post(
        "/admin/connectors",
        operation_id="page_import_connector",
        opt=MANAGE,
        status_code=200,
        request_max_body_size=svc.IMPORT_BODY_BYTES,
    )
    async def import_connector(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        data: MultipartBody[dict[str, Any]],
    ) -> Response[str]:
        """Import the uploaded or fetched document; the page shows what happened."""
        shown = {k: v for k, v in data.items() if isinstance(v, str)}
        try:
            raw, url = await _document(runtime, data)
            result = await svc.import_and_install(
                runtime.sessionmaker,
                runtime.catalog,
                announce=runtime.catalog_watch.announce,
                name=str(data.get("name") or "").strip(),
                label=str(data.get("label") or "").strip(),
                data=raw,
                source_url=url,
                user_id=uuid.UUID(principal.user_id),
                dry_run=bool(data.get("dry_run")),
            )
        except svc.ImportRefused as exc:
            return await self._page(request, db, error=exc, form=shown)
        return await self._page(request, db, result=result, form=shown)

    @get(
        "/admin/connectors/{connector_name:str}",
        operation_id="page_admin_connector",
        opt=MANAGE,
    )
    async def connector_page(
        self, request: Request[Any, Any, Any], db: DbSession, connector_name: FromPath[str]
    ) -> Response[str]:
        """One imported connector: operations with their node-type versions, refused
        operations with the reason, and every version with what it changed."""
        try:
            connector = await svc.get_connector(db, connector_name)
        except svc.ConnectorNotFound:
            return render(
                request,
                "error.html",
                status_code=404,
                status_code_=404,
                message=f"no imported connector named {connector_name}",
            )
        return render(request, "admin_connector.html", connector=connector)
