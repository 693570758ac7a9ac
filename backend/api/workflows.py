"""``/api/workflows``: workflows, drafts, compile, publish, versions and manual runs."""

from __future__ import annotations

import uuid

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post, put
from litestar.exceptions import HTTPException
from litestar.params import FromPath, JSONBody

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
    WorkflowOut,
    WorkflowPatch,
)
from backend.auth.guards import CurrentPrincipal, access_dependencies
from backend.auth.policy import Permission
from backend.auth.web import AppRuntime, CurrentUser, DbSession
from backend.db.models import Workflow, WorkflowVersion
from backend.engine.workflow_settings import WorkflowSettings
from backend.runtime import Runtime
from backend.services import access, references, runs, webhooks
from backend.services import workflows as svc


def webhook_url(runtime: Runtime, wf: Workflow) -> str:
    """Public URL of the workflow's webhook."""
    return f"{runtime.settings.base_url.rstrip('/')}/hooks/{wf.webhook_token}"


def workflow_out(runtime: Runtime, wf: Workflow) -> WorkflowOut:
    """Wire form of a workflow."""
    return WorkflowOut(
        id=str(wf.id),
        name=wf.name,
        description=wf.description,
        active_version=wf.active_version,
        webhook_url=webhook_url(runtime, wf),
        draft=wf.draft,
        created_at=wf.created_at,
        updated_at=wf.updated_at,
        settings=WorkflowSettings.from_stored(wf.settings),
        draft_revision=wf.draft_revision,
        tags=list(wf.tags or []),
    )


def version_out(v: WorkflowVersion) -> VersionOut:
    """Wire form of a version."""
    return VersionOut(
        v.number, v.content_hash, v.created_at, str(v.created_by) if v.created_by else None
    )


def run_started(runtime: Runtime, run_id: uuid.UUID, status: str) -> RunStarted:
    """Links of an accepted run."""
    base = runtime.settings.base_url.rstrip("/")
    return RunStarted(
        run_id=str(run_id),
        status=status,
        url=f"{base}/runs/{run_id}",
        status_url=f"{base}/api/runs/{run_id}",
    )


class WorkflowController(Controller):
    """Workflows and their versions. Every route needs a logged-in user."""

    path = "/api/workflows"
    tags = ["workflows"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_workflows", opt={"permission": Permission.WORKFLOW_LIST})
    async def list_workflows(
        self, db: DbSession, runtime: AppRuntime, principal: CurrentPrincipal
    ) -> list[WorkflowOut]:
        """The workflows the caller may read, most recently updated first."""
        visible = await access.workflow_filter(db, principal)
        return [workflow_out(runtime, wf) for wf in await svc.list_workflows(db, visible)]

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
    ) -> DiagnosticsOut:
        """Compile a diagram without saving it (400 naming the limit when it is too large)."""
        await svc.get_workflow(db, workflow_id)
        svc.check_diagram_limits(data.diagram, runtime.settings.diagram_limits())
        graph, diagnostics = svc.compile_for(data.diagram, runtime.catalog)
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
    ) -> Response[PublishOut]:
        """Publish the draft: 201 with a new version, 200 when unchanged, 422 with
        diagnostics, 403 when it references a credential the caller may not use."""
        draft = (await svc.get_workflow(db, workflow_id)).draft
        await references.check_diagram(db, principal, draft, runtime.catalog)
        result = await svc.publish(db, workflow_id, runtime.catalog, user.id)
        webhooks.clear_endpoint_cache()
        wf = await svc.get_workflow(db, workflow_id)
        body = PublishOut(version_out(result.version), result.created, webhook_url(runtime, wf))
        return Response(body, status_code=201 if result.created else 200)

    @delete(
        "/{workflow_id:uuid}",
        operation_id="delete_workflow",
        opt={"permission": Permission.WORKFLOW_MANAGE},
        status_code=204,
    )
    async def delete_workflow(self, workflow_id: FromPath[uuid.UUID], db: DbSession) -> None:
        """Delete a workflow with its versions and ended runs (409 while runs have not
        ended or another workflow uses it as its error workflow)."""
        await svc.delete_workflow(db, workflow_id)
        webhooks.clear_endpoint_cache()

    @get(
        "/{workflow_id:uuid}/versions",
        operation_id="list_versions",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def versions(self, workflow_id: FromPath[uuid.UUID], db: DbSession) -> list[VersionOut]:
        """Published versions, newest first."""
        await svc.get_workflow(db, workflow_id)
        return [version_out(v) for v in await svc.list_versions(db, workflow_id)]

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
    ) -> RunStarted:
        """Start a run of the active version with ``input`` (manual/API trigger, 201).

        Accepts a login session (with CSRF) or ``Authorization: Bearer <API token>``.
        """
        svc.check_json_limit(data.input, runtime.settings.max_json_depth, "input")
        wf = await svc.get_workflow(db, workflow_id)
        version = await svc.active_version(db, wf)
        if version is None:
            raise HTTPException(status_code=409, detail="publish the workflow before running it")
        started = await runs.start(
            runtime.execution,
            version,
            data.input,
            trigger="api" if request.scope.get("state", {}).get("auth") == "token" else "manual",
            idempotency_key=request.headers.get("idempotency-key"),
            user_id=user.id,
        )
        return run_started(runtime, started.run_id, started.status)
