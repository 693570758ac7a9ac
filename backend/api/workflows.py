"""``/api/workflows``: workflows, drafts, compile, publish, versions and manual runs."""

from __future__ import annotations

import uuid

import msgspec
from litestar import Controller, Request, Response, get, patch, post, put
from litestar.exceptions import HTTPException
from litestar.params import FromPath, JSONBody

from backend.api.schemas import (
    DiagnosticsOut,
    DiagramIn,
    PublishOut,
    RunCreate,
    RunStarted,
    VersionOut,
    WorkflowCreate,
    WorkflowOut,
    WorkflowPatch,
)
from backend.auth.web import AppRuntime, CurrentUser, DbSession, login_required, user_dependencies
from backend.db.models import Workflow, WorkflowVersion
from backend.engine.workflow_settings import WorkflowSettings
from backend.runtime import Runtime
from backend.services import webhooks
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
    guards = [login_required]
    dependencies = user_dependencies()

    @get("/", operation_id="list_workflows")
    async def list_workflows(self, db: DbSession, runtime: AppRuntime) -> list[WorkflowOut]:
        """All workflows, most recently updated first."""
        return [workflow_out(runtime, wf) for wf in await svc.list_workflows(db)]

    @post("/", operation_id="create_workflow")
    async def create_workflow(
        self, data: JSONBody[WorkflowCreate], db: DbSession, runtime: AppRuntime, user: CurrentUser
    ) -> WorkflowOut:
        """Create a workflow with an empty draft (201)."""
        wf = await svc.create_workflow(db, data.name, user.id, data.description)
        await db.refresh(wf)
        return workflow_out(runtime, wf)

    @get("/{workflow_id:uuid}", operation_id="get_workflow")
    async def get_workflow(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, runtime: AppRuntime
    ) -> WorkflowOut:
        """One workflow with its draft."""
        return workflow_out(runtime, await svc.get_workflow(db, workflow_id))

    @patch("/{workflow_id:uuid}", operation_id="update_workflow")
    async def update_workflow(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[WorkflowPatch],
        db: DbSession,
        runtime: AppRuntime,
    ) -> WorkflowOut:
        """Change name, description or run-control settings (400 naming the bad field)."""
        if data.settings is not msgspec.UNSET:
            await svc.update_settings(db, workflow_id, data.settings)
        wf = await svc.update_workflow(
            db,
            workflow_id,
            name=None if data.name is msgspec.UNSET else data.name,
            description=None if data.description is msgspec.UNSET else data.description,
        )
        await db.refresh(wf)
        return workflow_out(runtime, wf)

    @put("/{workflow_id:uuid}/draft", operation_id="save_draft")
    async def save_draft(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[DiagramIn],
        db: DbSession,
        runtime: AppRuntime,
    ) -> DiagnosticsOut:
        """Store the draft diagram (even with errors) and return its diagnostics; 400
        naming the limit for a diagram over the installation's size limits."""
        svc.check_diagram_limits(data.diagram, runtime.settings.diagram_limits())
        diagnostics = await svc.save_draft(db, workflow_id, data.diagram, runtime.catalog)
        return DiagnosticsOut(
            ok=not any(d.severity == "error" for d in diagnostics), diagnostics=diagnostics
        )

    @post("/{workflow_id:uuid}/compile", operation_id="compile_diagram", status_code=200)
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

    @post("/{workflow_id:uuid}/publish", operation_id="publish_workflow")
    async def publish(
        self,
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
    ) -> Response[PublishOut]:
        """Publish the draft: 201 with a new version, 200 when unchanged, 422 with diagnostics."""
        result = await svc.publish(db, workflow_id, runtime.catalog, user.id)
        webhooks.clear_endpoint_cache()
        wf = await svc.get_workflow(db, workflow_id)
        body = PublishOut(version_out(result.version), result.created, webhook_url(runtime, wf))
        return Response(body, status_code=201 if result.created else 200)

    @get("/{workflow_id:uuid}/versions", operation_id="list_versions")
    async def versions(self, workflow_id: FromPath[uuid.UUID], db: DbSession) -> list[VersionOut]:
        """Published versions, newest first."""
        await svc.get_workflow(db, workflow_id)
        return [version_out(v) for v in await svc.list_versions(db, workflow_id)]

    @post("/{workflow_id:uuid}/runs", operation_id="start_run")
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
        started = await runtime.execution.start_run(
            version,
            data.input,
            trigger="api" if request.scope.get("state", {}).get("auth") == "token" else "manual",
            idempotency_key=request.headers.get("idempotency-key"),
            user_id=user.id,
        )
        return run_started(runtime, started.run_id, started.status)
