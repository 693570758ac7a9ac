"""``/api/workflows``: version history, one version, restore into the draft, compare two
versions (or a version and the draft), export and import (docs/designer.md, "Versions" and
"Import and export")."""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from backend.api.list_schemas import VersionList
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, listed
from backend.api.schemas import VersionOut
from backend.api.version_schemas import (
    CompareOut,
    ImportedOut,
    RestoredOut,
    RestoreIn,
    VersionDetailOut,
)
from backend.auth.policy import Permission
from backend.services.errors import InvalidInput
from backend.services.identity import references
from backend.services.workflows import workflow_transfer, workflow_versions
from backend.services.workflows import workflows as svc
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies
from designer_schema.diagram import Diagram
from designer_schema.transfer import WorkflowExport, encode_export

READ = {"permission": Permission.WORKFLOW_READ}
EDIT = {"permission": Permission.WORKFLOW_EDIT}


def _filename(name: str, ref: int | str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "workflow"
    suffix = "draft" if ref == workflow_versions.DRAFT else f"v{ref}"
    return f"{slug}-{suffix}.railyard.json"


def _imported(
    base_url: str,
    workflow_id: uuid.UUID,
    name: str,
    plan: workflow_transfer.ImportPlan,
    saved: svc.DraftSaved,
) -> ImportedOut:
    """Wire form of an import: the references to re-bind first, then the compiler's
    diagnostics of the stored draft; ``url`` is the designer's absolute URL (on
    ``base_url``, the setting)."""
    return ImportedOut(
        id=str(workflow_id),
        name=name,
        url=f"{base_url.rstrip('/')}/workflows/{workflow_id}/designer",
        revision=saved.revision,
        references_bound=plan.bound,
        diagnostics=plan.diagnostics + saved.diagnostics,
    )


class WorkflowVersionController(Controller):
    """Versions of a workflow, compare, restore, import and export."""

    path = "/api/v1/workflows"
    tags = ["versions"]
    dependencies = access_dependencies()

    @get("/{workflow_id:uuid}/versions", operation_id="list_versions", opt=READ)
    async def versions(
        self,
        request: Request[Any, Any, Any],
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> VersionList:
        """Published versions, newest first: number, publisher, when, note, active."""
        found = [
            VersionOut(
                v.number,
                v.content_hash,
                v.created_at,
                str(v.created_by) if v.created_by else None,
                publisher=v.publisher,
                active=v.active,
                note=v.note,
            )
            for v in await workflow_versions.history(db, workflow_id)
        ]
        return listed(
            request,
            VersionList,
            found,
            lambda v: (v.version,),
            tuple[int],
            cursor=cursor,
            limit=limit,
            descending=True,
        )

    @get("/{workflow_id:uuid}/versions/{number:int}", operation_id="get_version", opt=READ)
    async def version(
        self, workflow_id: FromPath[uuid.UUID], number: FromPath[int], db: DbSession
    ) -> VersionDetailOut:
        """One version with its diagram (404 when there is no such version)."""
        v, publisher = await workflow_versions.get_version(db, workflow_id, number)
        wf = await svc.get_workflow(db, workflow_id)
        return VersionDetailOut(
            version=v.number,
            content_hash=v.content_hash,
            created_at=v.created_at,
            created_by=str(v.created_by) if v.created_by else None,
            publisher=publisher,
            note=v.note,
            active=wf.active_version == v.number,
            diagram=msgspec.convert(v.diagram, Diagram),
        )

    @post(
        "/{workflow_id:uuid}/versions/{number:int}/restore",
        operation_id="restore_version",
        opt=EDIT,
        status_code=200,
    )
    async def restore(
        self,
        workflow_id: FromPath[uuid.UUID],
        number: FromPath[int],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        user: CurrentUser,
        data: JSONBody[RestoreIn | None] = None,
    ) -> RestoredOut:
        """Make version ``number``'s diagram the draft (a draft save: 409 with who saved
        when ``base_revision`` is older than the stored draft; 403 when the version uses a
        credential or workflow the caller may not, and the draft does not already)."""
        version, _ = await workflow_versions.get_version(db, workflow_id, number)
        wf = await svc.get_workflow(db, workflow_id)
        await references.check_diagram(
            db, principal, version.diagram, runtime.catalog, previous=wf.draft
        )
        saved, diagram = await workflow_versions.restore(
            db,
            workflow_id,
            number,
            runtime.catalog,
            base_revision=data.base_revision if data is not None else None,
            user_id=user.id,
            principal=principal,
        )
        return RestoredOut(
            ok=not any(d.severity == "error" for d in saved.diagnostics),
            revision=saved.revision,
            version=number,
            diagram=diagram,
            diagnostics=saved.diagnostics,
        )

    @get("/{workflow_id:uuid}/diff", operation_id="compare_versions", opt=READ)
    async def compare(
        self,
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        from_ref: Annotated[str | None, QueryParameter(name="from")] = None,
        to_ref: Annotated[str | None, QueryParameter(name="to")] = None,
    ) -> CompareOut:
        """What changed from ``from`` to ``to`` (each a version number or ``draft``;
        defaults: the active version and the draft), positions ignored: nodes and edges
        added, removed or changed, and each changed node's fields (400 naming the bad
        parameter, 404 for an unknown version)."""
        if from_ref is None:
            wf = await svc.get_workflow(db, workflow_id)
            if wf.active_version is None:
                raise InvalidInput("nothing is published yet: give from=<version>", "from")
            from_ref = str(wf.active_version)
        before = workflow_versions.parse_ref(from_ref, "from")
        after = workflow_versions.parse_ref(to_ref or workflow_versions.DRAFT, "to")
        result = await workflow_versions.compare(db, workflow_id, before, after)
        return CompareOut(before, after, result.diff.summary(), result.diff)

    @get("/{workflow_id:uuid}/export", operation_id="export_workflow", opt=READ)
    async def export(
        self,
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
        version: FromQuery[str | None] = None,
    ) -> Response[bytes]:
        """The ``railyard/workflow`` export document of the draft (default) or of
        ``?version=N``, as an attachment: credentials and called workflows by name, never
        a secret (docs/designer.md, "Import and export")."""
        ref = workflow_versions.parse_ref(version or workflow_versions.DRAFT, "version")
        doc = await workflow_transfer.export_workflow(
            db, runtime.catalog, workflow_id, ref, runtime.settings.base_url.rstrip("/")
        )
        return Response(
            encode_export(doc),
            media_type="application/json",
            headers={
                "Content-Disposition": (
                    f'attachment; filename="{_filename(doc.workflow.name, ref)}"'
                )
            },
        )

    @post(
        "/import",
        operation_id="import_workflow",
        opt={"permission": Permission.WORKFLOW_CREATE},
        status_code=201,
    )
    async def import_workflow(
        self,
        data: JSONBody[WorkflowExport],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        user: CurrentUser,
        name: FromQuery[str | None] = None,
    ) -> ImportedOut:
        """Create a workflow from an export document (the body), named as exported or
        ``?name=``: 201 with the new workflow's id and the references that could not be
        re-bound as diagnostics; 400 naming the place for a document that cannot be
        read or is over a limit."""
        plan = await workflow_transfer.plan_import(
            db, principal, runtime.catalog, data, runtime.settings.diagram_limits()
        )
        wf, saved = await workflow_transfer.import_new(db, plan, runtime.catalog, user.id, name)
        return _imported(runtime.settings.base_url, wf.id, wf.name, plan, saved)

    @post(
        "/{workflow_id:uuid}/import",
        operation_id="import_into_draft",
        opt=EDIT,
        status_code=200,
    )
    async def import_into_draft(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[WorkflowExport],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        user: CurrentUser,
        base_revision: FromQuery[int | None] = None,
    ) -> ImportedOut:
        """Replace this workflow's draft with an export document's diagram (name and
        settings stay): 409 when ``?base_revision=`` is older than the stored draft; 400
        for a document that cannot be read."""
        wf = await svc.get_workflow(db, workflow_id)
        plan = await workflow_transfer.plan_import(
            db, principal, runtime.catalog, data, runtime.settings.diagram_limits()
        )
        saved = await workflow_transfer.import_into_draft(
            db, plan, runtime.catalog, workflow_id, user.id, base_revision, principal
        )
        return _imported(runtime.settings.base_url, wf.id, wf.name, plan, saved)
