"""``/api/workflows/{id}/pins`` and ``/api/workflows/{id}/test-runs``: pinned data on the
draft's nodes and test runs of the draft (docs/designer.md, "Testing without
publishing")."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from litestar import Controller, delete, get, post, put
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, JSONBody

from backend.auth.policy import Permission
from backend.services.identity import references
from backend.services.workflows import draft_runs, pins
from backend.services.workflows import workflows as workflow_svc
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies


class PinIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of PUT /api/workflows/{id}/pins/{node_id}: the data to pin (any JSON)."""

    data: Any


class TestRunIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/workflows/{id}/test-runs.

    ``step_id``: test just that step (with the data of the steps before it); absent: the
    whole draft. ``input``: the run input; absent: the trigger's pinned data, else the last
    run's input, else ``{}``.
    """

    step_id: str | None = None
    input: Any | msgspec.UnsetType = msgspec.UNSET


class TestRunOut(msgspec.Struct):
    """A started test run: its links, and what it does. ``executes``: action steps that
    really run (their connectors are called); ``substituted``: step id -> ``pinned`` or
    ``last_run`` for steps replaced by data; ``input_source``: where the run input came
    from (``given``, ``pinned``, ``last_run``, ``empty``)."""

    id: str
    status: str
    url: str
    status_url: str
    events_url: str
    step_id: str | None
    executes: list[str]
    substituted: dict[str, str]
    input_source: str


async def _unpin(db: DbSession, workflow_id: uuid.UUID, node_id: str) -> None:
    """Remove ``node_id``'s pin; ``NotFoundException`` (404) when it has none."""
    if not await pins.unpin(db, workflow_id, node_id):
        raise NotFoundException(f"node {node_id!r} has no pinned data")


class PinController(Controller):
    """Data pinned on the nodes of a workflow's draft (edit level to change, read to see)."""

    path = "/api/v1/workflows/{workflow_id:uuid}/pins"
    tags = ["test runs"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_pins", opt={"permission": Permission.WORKFLOW_READ})
    async def list_pins(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession
    ) -> dict[str, pins.Pin]:
        """Every pin of the draft, by node id."""
        return pins.pins_of(await workflow_svc.get_workflow(db, workflow_id))

    @put("/{node_id:str}", operation_id="pin_data", opt={"permission": Permission.WORKFLOW_EDIT})
    async def pin(
        self,
        workflow_id: FromPath[uuid.UUID],
        node_id: FromPath[str],
        data: JSONBody[PinIn],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
    ) -> pins.Pin:
        """Pin ``data`` on a node of the saved draft (400 naming ``node_id`` when the node
        is not in it, or ``data`` when over 1 MiB or too deep)."""
        return await pins.pin(
            db,
            workflow_id,
            node_id,
            data.data,
            user_id=user.id,
            max_json_depth=runtime.settings.max_json_depth,
        )

    @delete(
        "/{node_id:str}", operation_id="unpin_data", opt={"permission": Permission.WORKFLOW_EDIT}
    )
    async def unpin(
        self, workflow_id: FromPath[uuid.UUID], node_id: FromPath[str], db: DbSession
    ) -> None:
        """Remove a node's pin: 204; 404 when it has none."""
        await _unpin(db, workflow_id, node_id)

    @post(
        "/{node_id:str}/delete",
        operation_id="unpin_data_by_post",
        opt={"permission": Permission.WORKFLOW_EDIT},
        status_code=200,
        include_in_schema=False,
    )
    async def unpin_by_post(
        self, workflow_id: FromPath[uuid.UUID], node_id: FromPath[str], db: DbSession
    ) -> dict[str, bool]:
        """Deprecated (until 2027-06-30, CHANGELOG.md): ``DELETE .../pins/{node_id}``.
        Remove a node's pin (404 when it has none); answers ``{"unpinned": true}``."""
        await _unpin(db, workflow_id, node_id)
        return {"unpinned": True}


class TestRunController(Controller):
    """Test runs of a workflow's draft (run level on the workflow)."""

    path = "/api/v1/workflows/{workflow_id:uuid}/test-runs"
    tags = ["test runs"]
    dependencies = access_dependencies()

    @post("/", operation_id="start_test_run", opt={"permission": Permission.WORKFLOW_RUN})
    async def start(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[TestRunIn],
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        principal: CurrentPrincipal,
    ) -> TestRunOut:
        """Start a test run of the saved draft (201): the whole workflow, or ``step_id``
        with the data of the steps before it. 422 with diagnostics when the draft does not
        compile; 400 naming ``step_id`` or ``input``; 403 when the draft uses a credential
        or workflow the caller may not use."""
        given = data.input is not msgspec.UNSET
        if given:
            workflow_svc.check_json_limit(data.input, runtime.settings.max_json_depth, "input")
        draft = (await workflow_svc.get_workflow(db, workflow_id)).draft
        await references.check_diagram(db, principal, draft, runtime.catalog)
        started = await draft_runs.start_test_run(
            db,
            runtime.execution,
            runtime.catalog,
            workflow_id,
            user_id=user.id,
            step_id=data.step_id,
            input=data.input if given else None,
            input_given=given,
        )
        base = runtime.settings.base_url.rstrip("/")
        return TestRunOut(
            id=str(started.run_id),
            status=started.status,
            url=f"{base}/runs/{started.run_id}",
            status_url=f"{base}/api/v1/runs/{started.run_id}",
            events_url=f"{base}/api/v1/runs/{started.run_id}/events",
            step_id=started.step_id,
            executes=started.executes,
            substituted=started.substituted,
            input_source=started.input_source,
        )
