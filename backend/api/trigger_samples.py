"""``/api/workflows/{id}/trigger-sample``: the designer's "Fetch test event" for a
connector trigger of the draft (docs/designer.md, "Connector triggers").

- ``POST`` (edit): run the draft trigger's code once and pin the event it heard (a poll,
  the first broker or email message, unacknowledged), or pin its example
  (``{"mode": "example"}``); an app webhook answers ``listening`` and the next delivery
  to its URL becomes the sample.
- ``GET`` (read): the app webhook's listening state and URL (the designer polls it).
- ``POST .../stop`` (edit): stop listening.

Errors of the trigger's code are answered with their message: 400 when the node's config
or credential is wrong, 502 when the trigger or the app it calls failed (e.g. the vendor
answered 401), 504 when it did not answer within 30 s; ``extra.kind`` is the
connector's error kind.
"""

from __future__ import annotations

import uuid
from typing import Literal

import msgspec
from litestar import Controller, get, post
from litestar.params import FromPath, JSONBody

from backend.auth.policy import Permission
from backend.services.triggers.events import sample_fetch, samples
from backend.web.authentication import AppRuntime, CurrentUser
from backend.web.guards import CurrentPrincipal, access_dependencies


class TriggerSampleIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/workflows/{id}/trigger-sample.

    ``node_id``: the draft's trigger node (default: its one trigger); ``mode``:
    ``fetch`` runs the trigger's code, ``example`` pins the trigger's example event.
    """

    node_id: str | None = None
    mode: Literal["fetch", "example"] = "fetch"


class TriggerSampleController(Controller):
    """Test events of a draft's connector trigger."""

    path = "/api/v1/workflows/{workflow_id:uuid}/trigger-sample"
    tags = ["test runs"]
    dependencies = access_dependencies()

    @post(
        "/",
        operation_id="fetch_trigger_sample",
        opt={"permission": Permission.WORKFLOW_EDIT},
        status_code=200,
    )
    async def fetch(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[TriggerSampleIn],
        runtime: AppRuntime,
        user: CurrentUser,
        principal: CurrentPrincipal,
    ) -> samples.SampleState:
        """Fetch a test event of the saved draft's trigger and pin it on the trigger node
        (``status`` ``pinned``, or ``empty`` with a ``message`` when nothing was there or
        arrived within 30 s); an app webhook answers ``listening`` with its ``url``.
        400 naming ``node_id`` or ``mode``; 403 when the trigger's credential is not
        yours to use; 409 for an archived workflow; 502/504 when the trigger failed."""
        return await sample_fetch.fetch(
            runtime.events,
            runtime.catalog,
            workflow_id,
            principal=principal,
            user_id=user.id,
            node_id=data.node_id,
            mode=data.mode,
            max_json_depth=runtime.settings.max_json_depth,
        )

    @get("/", operation_id="get_trigger_sample", opt={"permission": Permission.WORKFLOW_READ})
    async def state(
        self, workflow_id: FromPath[uuid.UUID], runtime: AppRuntime
    ) -> samples.SampleState:
        """Whether the app webhook trigger listens for a test event, what arrived (the
        data itself is the trigger node's pin) and the trigger URL (``null`` until the
        first fetch or publish)."""
        return await samples.sample_state(runtime.events, workflow_id)

    @post(
        "/stop",
        operation_id="stop_trigger_sample",
        opt={"permission": Permission.WORKFLOW_EDIT},
        status_code=200,
    )
    async def stop(
        self, workflow_id: FromPath[uuid.UUID], runtime: AppRuntime
    ) -> samples.SampleState:
        """Stop listening for a test event (nothing is pinned)."""
        return await samples.stop_listening(runtime.events, workflow_id)
