"""``/api/workflows``: workflows, drafts, compile, publish, versions and manual runs."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.params import FromPath, FromQuery, HeaderParameter, JSONBody

from backend.api.list_schemas import WorkflowList
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, page_links
from backend.api.run_links import run_started
from backend.api.schemas import (
    DiagnosticsOut,
    DiagramIn,
    DraftIn,
    DraftSavedOut,
    PublishOut,
    RunCreate,
    RunStarted,
    VersionOut,
    WorkflowCreate,
    WorkflowDuplicate,
    WorkflowOut,
    WorkflowPatch,
    WorkflowSummary,
)
from backend.api.version_schemas import PublishIn
from backend.auth.policy import Permission
from backend.engine.workflow_settings import WorkflowSettings
from backend.runtime import Runtime
from backend.services.identity import access, references
from backend.services.runs import runs
from backend.services.triggers import webhook_urls, webhooks
from backend.services.workflows import workflow_lifecycle, workflow_versions
from backend.services.workflows import workflows as svc
from backend.services.workflows.records import VersionRecord, WorkflowRecord
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies


def webhook_url(runtime: Runtime, wf: WorkflowRecord) -> str:
    """Public URL of the workflow's webhook."""
    return webhook_urls.webhook_url(runtime.settings.base_url, wf.webhook_token)


def workflow_out(runtime: Runtime, wf: WorkflowRecord) -> WorkflowOut:
    """Wire form of a workflow."""
    return WorkflowOut(draft=wf.draft, **msgspec.structs.asdict(workflow_summary(runtime, wf)))


def workflow_summary(runtime: Runtime, wf: WorkflowRecord) -> WorkflowSummary:
    """Wire form of a workflow in a list (no draft)."""
    return WorkflowSummary(
        id=str(wf.id),
        name=wf.name,
        description=wf.description,
        active_version=wf.active_version,
        webhook_url=webhook_url(runtime, wf),
        created_at=wf.created_at,
        updated_at=wf.updated_at,
        settings=WorkflowSettings.from_stored(wf.settings),
        draft_revision=wf.draft_revision,
        archived_at=wf.archived_at,
        tags=list(wf.tags or []),
    )


def version_out(v: VersionRecord, publisher: str | None, active: bool) -> VersionOut:
    """Wire form of a version: ``publisher`` is the publishing account's display name or
    e-mail (None when it is gone), ``active`` whether webhooks and schedules run it."""
    return VersionOut(
        v.number,
        v.content_hash,
        v.created_at,
        str(v.created_by) if v.created_by else None,
        publisher=publisher,
        active=active,
        note=v.note,
    )


class WorkflowController(Controller):
    """Workflows and their versions. Every route needs a logged-in user."""

    path = "/api/v1/workflows"
    tags = ["workflows"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_workflows", opt={"permission": Permission.WORKFLOW_LIST})
    async def list_workflows(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        archived: FromQuery[bool] = False,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> WorkflowList:
        """The workflows the caller may read (without drafts: ``GET .../{id}`` has it),
        newest first (by creation, then id); with ``?archived=true`` the archived ones
        instead."""
        visible = await access.workflow_filter(db, principal)
        page = await svc.page_workflows(db, visible, archived=archived, cursor=cursor, limit=limit)
        found = [workflow_summary(runtime, wf) for wf in page.items]
        return WorkflowList(data=found, **page_links(request, page))

    @post("/", operation_id="create_workflow", opt={"permission": Permission.WORKFLOW_CREATE})
    async def create_workflow(
        self, data: JSONBody[WorkflowCreate], db: DbSession, runtime: AppRuntime, user: CurrentUser
    ) -> WorkflowOut:
        """Create a workflow with an empty draft (201)."""
        wf = await svc.create_workflow(db, data.name, user.id, data.description, data.tags)
        await db.refresh(wf)
        return workflow_out(runtime, wf)

    @get(
        "/{workflow_id:uuid}",
        operation_id="get_workflow",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def get_workflow(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, runtime: AppRuntime
    ) -> WorkflowOut:
        """One workflow with its draft."""
        return workflow_out(runtime, await svc.get_workflow(db, workflow_id))

    @patch(
        "/{workflow_id:uuid}",
        operation_id="update_workflow",
        opt={"permission": Permission.WORKFLOW_EDIT},
    )
    async def update_workflow(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[WorkflowPatch],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
    ) -> WorkflowOut:
        """Change name, description or run-control settings (400 naming the bad field)."""
        if data.settings is not msgspec.UNSET:
            await references.check_called_workflow(
                db, principal, data.settings.get("error_workflow_id"), "error_workflow_id"
            )
            await svc.update_settings(db, workflow_id, data.settings)
        wf = await svc.update_workflow(
            db,
            workflow_id,
            name=None if data.name is msgspec.UNSET else data.name,
            description=None if data.description is msgspec.UNSET else data.description,
            tags=None if data.tags is msgspec.UNSET else data.tags,
        )
        await db.refresh(wf)
        return workflow_out(runtime, wf)

    @put(
        "/{workflow_id:uuid}/draft",
        operation_id="save_draft",
        opt={"permission": Permission.WORKFLOW_EDIT},
    )
    async def save_draft(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[DraftIn],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        user: CurrentUser,
    ) -> DraftSavedOut:
        """Store the draft diagram (even with errors): its new revision and diagnostics.

        400 naming the limit for a diagram over the installation's size limits; 403 when it
        adds a reference to a credential the caller may not use. With
        ``base_revision`` a save over someone else's newer save is refused: 409 with who
        saved the stored revision and when (docs/designer.md, "Saving").
        """
        svc.check_diagram_limits(data.diagram, runtime.settings.diagram_limits())
        wf = await svc.get_workflow(db, workflow_id)
        await references.check_diagram(
            db, principal, data.diagram, runtime.catalog, previous=wf.draft
        )
        saved = await svc.save_draft(
            db,
            workflow_id,
            data.diagram,
            runtime.catalog,
            base_revision=data.base_revision,
            user_id=user.id,
            principal=principal,
        )
        return DraftSavedOut(
            ok=not any(d.severity == "error" for d in saved.diagnostics),
            diagnostics=saved.diagnostics,
            revision=saved.revision,
        )

    @post(
        "/{workflow_id:uuid}/compile",
        operation_id="compile_diagram",
        opt={"permission": Permission.WORKFLOW_READ},
        status_code=200,
    )
    async def compile(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[DiagramIn],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
    ) -> DiagnosticsOut:
        """Compile a diagram without saving it (400 naming the limit when it is too large);
        the diagnostics include references to missing or wrong-typed credentials and to
        missing or archived workflows."""
        await svc.get_workflow(db, workflow_id)
        svc.check_diagram_limits(data.diagram, runtime.settings.diagram_limits())
        graph, diagnostics = await svc.check_for(
            db, data.diagram, runtime.catalog, workflow_id, principal
        )
        return DiagnosticsOut(ok=graph is not None, diagnostics=diagnostics)

    @post(
        "/{workflow_id:uuid}/publish",
        operation_id="publish_workflow",
        opt={"permission": Permission.WORKFLOW_EDIT},
    )
    async def publish(
        self,
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        principal: CurrentPrincipal,
        data: JSONBody[PublishIn | None] = None,
    ) -> Response[PublishOut]:
        """Publish the draft, with an optional ``note`` (body ``{"note": "..."}``): 201 with
        a new version, 200 when unchanged (both with the draft's ``warnings``), 422 with
        diagnostics, 403 when it references a credential the caller may not use, 409 when the
        workflow is archived."""
        draft = (await svc.get_workflow(db, workflow_id)).draft
        await references.check_diagram(db, principal, draft, runtime.catalog)
        note = data.note if data is not None else ""
        result = await svc.publish(
            db, workflow_id, runtime.catalog, user.id, note, principal=principal
        )
        webhooks.clear_endpoint_cache()
        wf = await svc.get_workflow(db, workflow_id)
        number = result.version.number
        _, publisher = await workflow_versions.get_version(db, workflow_id, number)
        version = version_out(result.version, publisher, wf.active_version == number)
        body = PublishOut(version, result.created, webhook_url(runtime, wf), result.warnings)
        return Response(body, status_code=201 if result.created else 200)

    @delete(
        "/{workflow_id:uuid}",
        operation_id="archive_workflow",
        opt={"permission": Permission.WORKFLOW_MANAGE},
        status_code=204,
    )
    async def archive_workflow(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, user: CurrentUser
    ) -> None:
        """Delete = archive: the workflow leaves the lists, its webhook answers 410, its
        schedule stops and it starts no new runs; versions and runs are kept (runs stay
        listed and searchable). 409 while an active workflow uses it as its error workflow.
        ``POST .../restore`` undoes it."""
        await workflow_lifecycle.archive_workflow(db, workflow_id, user.id)
        webhooks.clear_endpoint_cache()

    @post(
        "/{workflow_id:uuid}/restore",
        operation_id="restore_workflow",
        opt={"permission": Permission.WORKFLOW_MANAGE},
        status_code=200,
    )
    async def restore_workflow(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, runtime: AppRuntime
    ) -> WorkflowOut:
        """Restore an archived workflow: back in the lists, webhook and schedule active."""
        wf = await workflow_lifecycle.restore_workflow(db, workflow_id, runtime.catalog.triggers)
        webhooks.clear_endpoint_cache()
        await db.refresh(wf)
        return workflow_out(runtime, wf)

    @post(
        "/{workflow_id:uuid}/duplicate",
        operation_id="duplicate_workflow",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def duplicate_workflow(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[WorkflowDuplicate],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        user: CurrentUser,
    ) -> WorkflowOut:
        """Copy a workflow the caller may read into a new one the caller owns (201): draft,
        description and settings, no versions or runs. 403 without the right to create
        workflows, or when the draft names a credential or workflow (or the settings an
        error workflow) the caller may not use."""
        wf = await workflow_lifecycle.duplicate_as(
            db, principal, workflow_id, user.id, runtime.catalog, name=data.name
        )
        await db.refresh(wf)
        return workflow_out(runtime, wf)

    @post(
        "/{workflow_id:uuid}/runs",
        operation_id="start_run",
        opt={"permission": Permission.WORKFLOW_RUN},
    )
    async def start_run(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[RunCreate],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        request: Request,
        idempotency_key: Annotated[
            str | None,
            HeaderParameter(
                name="Idempotency-Key",
                min_length=1,
                max_length=200,
                description=(
                    "Starts at most one run of this workflow per key: a repeat answers the"
                    " first run (keys are scoped to the workflow)"
                ),
            ),
        ] = None,
    ) -> RunStarted:
        """Start a run of the active version with ``input`` (manual/API trigger, 201).

        Accepts a login session (with CSRF) or ``Authorization: Bearer <API token>``.
        """
        svc.check_json_limit(data.input, runtime.settings.max_json_depth, "input")
        wf = await svc.get_workflow(db, workflow_id)
        svc.ensure_active(wf)
        version = await svc.active_version(db, wf)
        if version is None:
            raise svc.WorkflowNotPublished()
        started = await runs.start(
            runtime.execution,
            version,
            data.input,
            trigger="api" if request.scope.get("state", {}).get("auth") == "token" else "manual",
            idempotency_key=idempotency_key,
            user_id=user.id,
        )
        return run_started(runtime, started.run_id, started.status)
