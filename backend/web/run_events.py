"""The run event stream: Server-Sent Events (``text/event-stream``, WHATWG HTML, "Server-sent
events") following one run, served by ``GET /api/v1/runs/{id}/events`` and the run page's
``/runs/{id}/events`` alike (docs/api.md, "The run event stream").

Each event type the stream sends has a wire type here, documented as a named schema of the
OpenAPI document (:data:`RunStreamEvent`, the item schema of the stream). Today there is
one: ``update`` (:class:`RunUpdateEvent`), whose ``data`` line is the run as ``GET
/api/v1/runs/{id}`` answers it (:class:`backend.services.runs.runs.RunDetail`), sent once when the
stream opens and again after every change; the stream ends after the update in which the
run has ended (or at once when the run is deleted). Changes are followed as
:func:`backend.services.runs.run_watch.run_updates` describes (a Redis notice, else a read every
second).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from typing import Literal

import msgspec
from litestar.response import ServerSentEvent, ServerSentEventMessage

from backend.runtime import Runtime
from backend.services.runs import run_watch
from backend.services.runs.runs import RunDetail

UPDATE: Literal["update"] = "update"
"""The ``event:`` name of an update."""


class RunUpdateEvent(msgspec.Struct):
    """One event of the run event stream: ``event: update`` and a ``data:`` line holding
    the run (JSON, the answer of ``GET /api/v1/runs/{id}``) as it is now."""

    event: Literal["update"]
    data: RunDetail


RunStreamEvent = RunUpdateEvent
"""Every event type the run event stream sends (a union once there is more than one)."""


def run_event_stream(runtime: Runtime, run_id: uuid.UUID) -> ServerSentEvent:
    """The response streaming run ``run_id``'s events (see the module doc)."""
    return ServerSentEvent(_updates(runtime, run_id))


async def _updates(
    runtime: Runtime, run_id: uuid.UUID
) -> AsyncGenerator[ServerSentEventMessage, None]:
    async for payload in run_watch.run_updates(
        runtime.sessionmaker, runtime.redis, run_id, runtime.settings.base_url
    ):
        yield ServerSentEventMessage(data=payload.decode(), event=UPDATE)
