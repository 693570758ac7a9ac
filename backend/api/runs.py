"""``/api/v1/runs``: run lists, run detail with steps and attempts, the run event stream,
cancel, pause, resume, re-run, replay from a step."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Controller, Request, Response, get, post
from litestar.params import FromPath, FromQuery, JSONBody, Parameter
from litestar.response import ServerSentEvent

from backend.api.list_schemas import ChildList, RunList
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, page_links
from backend.api.run_links import run_started
from backend.api.schemas import ReplayIn, RerunIn, RunStarted
from backend.auth.policy import Permission
from backend.engine.states import RunStatus
from backend.services.identity import access
from backend.services.paging import Slice
from backend.services.runs import run_children, run_values
from backend.services.runs import runs as svc
from backend.services.runs.execution import RunNotActive, RunNotFound
from backend.services.workflows.workflows import check_json_limit
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies
from backend.web.run_events import run_event_stream


class RunController(Controller):
    """Runs. Every route needs a logged-in user."""

    path = "/api/v1/runs"
    tags = ["runs"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_runs", opt={"permission": Permission.WORKFLOW_LIST})
    async def list_runs(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        principal: CurrentPrincipal,
        workflow_id: FromQuery[uuid.UUID | None] = None,
        status: FromQuery[RunStatus | None] = None,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> RunList:
        """Runs of workflows the caller may read, newest first (by creation, then id);
        filter by ``workflow_id`` and ``status`` (one of the run statuses). A list
        envelope (docs/api.md, "Lists")."""
        visible = await access.workflow_filter(db, principal)
        page = await svc.page_runs(
            db,
            workflow_id=workflow_id,
            status=status.value if status else None,
            cursor=cursor,
            limit=limit,
            visible=visible,
        )
        return RunList(data=page.items, **page_links(request, page))

    @get("/{run_id:uuid}", operation_id="get_run", opt={"permission": Permission.RUN_READ})
    async def get_run(
        self, run_id: FromPath[uuid.UUID], db: DbSession, runtime: AppRuntime
    ) -> svc.RunDetail:
        """The run with every step and its attempts (large values' ``download_url``
        absolute)."""
        found = await svc.get_run_detail(db, run_id, runtime.settings.base_url)
        if found is None:
            raise RunNotFound(f"run {run_id} not found")
        return found[0]

    @get(
        "/{run_id:uuid}/children",
        operation_id="list_run_children",
        opt={"permission": Permission.RUN_READ},
    )
    async def children(
        self,
        request: Request[Any, Any, Any],
        run_id: FromPath[uuid.UUID],
        db: DbSession,
        step_id: FromQuery[str | None] = None,
        cursor: FromQuery[str | None] = None,
        limit: Annotated[int, Parameter(ge=1, le=run_children.MAX_CHILD_PAGE)] = (
            run_children.CHILD_PAGE
        ),
    ) -> ChildList:
        """The run's child runs (Sub-workflow, For-each), a page at a time in (step, item
        index) order, in the list envelope with ``total``; ``step_id`` keeps one calling
        step's; ``cursor`` is the previous page's ``next_cursor``; ``limit`` 1..500."""
        found = await run_children.child_page(
            db, run_id, step_id=step_id, cursor=cursor, limit=limit
        )
        links = page_links(request, Slice(found.children, found.next_cursor))
        return ChildList(data=found.children, total=found.total, **links)

    @get(
        "/{run_id:uuid}/events",
        operation_id="stream_run_events",
        opt={"permission": Permission.RUN_READ},
    )
    async def stream_events(
        self, run_id: FromPath[uuid.UUID], runtime: AppRuntime
    ) -> ServerSentEvent:
        """The run event stream (``text/event-stream``, backend/web/run_events.py): an
        ``update`` event with the run as ``GET /api/v1/runs/{id}`` answers it, now and
        after every change, until the run has ended; the stream then closes."""
        return run_event_stream(runtime, run_id)

    @get(
        "/{run_id:uuid}/values/{digest:str}",
        operation_id="download_run_value",
        opt={"permission": Permission.RUN_READ},
    )
    async def download_value(
        self, run_id: FromPath[uuid.UUID], digest: FromPath[str], db: DbSession
    ) -> Response[bytes]:
        """The whole of a large value of the run (JSON), the ``download_url`` of its
        preview in the run detail. 404 when the run does not hold that value."""
        data = await run_values.download(db, run_id, digest)
        if data is None:
            raise RunNotFound(f"run {run_id} has no value {digest}")
        return Response(
            data,
            media_type="application/json",
            headers={
                "content-disposition": f'attachment; filename="run-{run_id}-{digest[:12]}.json"'
            },
        )

    @post(
        "/{run_id:uuid}/cancel",
        operation_id="cancel_run",
        opt={"permission": Permission.RUN_CONTROL},
        status_code=200,
    )
    async def cancel(self, run_id: FromPath[uuid.UUID], runtime: AppRuntime) -> dict[str, bool]:
        """Cancel a run that has not ended (``{"cancelled": true}``); 409 when it had
        ended, as pausing or resuming a run in the wrong state is."""
        if not await svc.cancel(runtime.execution, run_id):
            raise RunNotActive(f"run {run_id} has already ended")
        return {"cancelled": True}

    @post(
        "/{run_id:uuid}/pause",
        operation_id="pause_run",
        opt={"permission": Permission.RUN_CONTROL},
        status_code=200,
    )
    async def pause(self, run_id: FromPath[uuid.UUID], runtime: AppRuntime) -> dict[str, str]:
        """Pause a running or waiting run (409 otherwise): nothing new starts."""
        await svc.pause(runtime.execution, run_id)
        return {"status": "paused"}

    @post(
        "/{run_id:uuid}/resume",
        operation_id="resume_run",
        opt={"permission": Permission.RUN_CONTROL},
        status_code=200,
    )
    async def resume(self, run_id: FromPath[uuid.UUID], runtime: AppRuntime) -> dict[str, str]:
        """Resume a paused run (409 otherwise)."""
        await svc.resume(runtime.execution, run_id)
        return {"status": "running"}

    @post(
        "/{run_id:uuid}/rerun", operation_id="rerun_run", opt={"permission": Permission.RUN_CONTROL}
    )
    async def rerun(
        self,
        run_id: FromPath[uuid.UUID],
        data: JSONBody[RerunIn],
        runtime: AppRuntime,
        user: CurrentUser,
    ) -> RunStarted:
        """Re-run an ended run (201): ``{"from": "failed_step"}`` repeats it on the same
        version from its failed step(s), copying the succeeded steps; ``{"from": "start"}``
        starts the current active version with the original input. 409 when the run has
        not ended (or succeeded, for ``failed_step``); 400 for another ``from``."""
        started = await svc.rerun(
            runtime.execution, run_id, start_from=data.start_from, user_id=user.id
        )
        return run_started(runtime, started.run_id, started.status)

    @post(
        "/{run_id:uuid}/replay",
        operation_id="replay_run",
        opt={"permission": Permission.RUN_CONTROL},
    )
    async def replay(
        self,
        run_id: FromPath[uuid.UUID],
        data: JSONBody[ReplayIn],
        runtime: AppRuntime,
        user: CurrentUser,
    ) -> RunStarted:
        """Replay an ended run from ``step_id`` with that step's input replaced by
        ``input`` (201): a new run of the same version, linked by ``rerun_of``; the steps
        before it keep their recorded outputs. 409 when the run has not ended; 400 naming
        ``step_id`` when the step is not in the run's version or was never reached, or
        ``input`` when it nests too deep."""
        check_json_limit(data.input, runtime.settings.max_json_depth, "input")
        started = await svc.replay(
            runtime.execution, run_id, step_id=data.step_id, input=data.input, user_id=user.id
        )
        return run_started(runtime, started.run_id, started.status)
