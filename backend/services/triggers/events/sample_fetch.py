"""The designer's "Fetch test event" (:func:`fetch`): a connector trigger's code run once
on the saved draft, its event pinned on the trigger node
(:mod:`backend.services.triggers.events.samples` says what a sample is). By kind:

=============  ===========================================================================
kind           what :func:`fetch` does
=============  ===========================================================================
``polling``    ``poll(config, cursor=None)`` once, within
               :data:`~backend.services.triggers.events.samples.FETCH_SECONDS`: the items as they
               are now (the stored cursor of a published trigger is neither used nor
               changed); the newest is pinned, the others (newest first, at most
               :data:`~backend.services.triggers.events.samples.MAX_CANDIDATES`) are offered to
               pick from
``broker``,    ``listen(config, emit)`` until the first message, at most ``FETCH_SECONDS``:
``email``      ``emit`` keeps the event and raises before the connector acks it, so the
               message stays with the broker or mailbox (and reaches a published
               subscription as usual); a message the trigger cannot read is reported,
               not acked either; nothing within the time is an ``empty`` answer
``app_webhook``  opens the listening window on the trigger URL
               (:func:`backend.services.triggers.events.samples.start_listening`): the answer is
               ``listening``, and the next delivery becomes the sample
=============  ===========================================================================

``mode="example"`` pins the trigger's ``output_example`` instead, for any kind.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from backend.services.availability import database_unavailable
from backend.services.triggers.events import samples
from backend.services.triggers.events.contexts import EventEnv, TriggerSite
from backend.services.triggers.events.kinds import LISTEN_KINDS
from backend.services.triggers.events.samples import (
    check_user,
    config_of,
    failure,
    invalid,
    pin_sample,
    site_of,
    start_listening,
    trigger_node,
    workflow_of,
)
from connectors import sdk

MODES = ("fetch", "example")
"""What :func:`fetch` may be asked: run the trigger's code, or pin its example."""


class _Taken(Exception):
    """Raised out of a sample's ``emit`` so the connector does not ack the message."""


class _SampleEmit:
    """The ``emit`` of a sample listen: keeps the first event (or dead letter) and raises
    before the connector acks it."""

    def __init__(self) -> None:
        self.event: sdk.TriggerEvent | None = None
        self.dead: tuple[str, bytes | str] | None = None
        self.arrived = asyncio.Event()

    async def __call__(self, event: sdk.TriggerEvent) -> None:
        if self.event is None and self.dead is None:
            self.event = event
        self.arrived.set()
        raise _Taken

    async def dead_letter(self, reason: str, raw: bytes | str, meta: dict[str, str]) -> None:
        if self.event is None and self.dead is None:
            self.dead = (reason, raw)
        self.arrived.set()
        raise _Taken


async def _poll(
    env: EventEnv, definition: Any, site: TriggerSite, config: Any
) -> samples.SampleState:
    result = await asyncio.wait_for(
        definition.call("poll", config, env.context(site, draft=True), None), samples.FETCH_SECONDS
    )
    if not isinstance(result, sdk.PollResult):
        raise samples.SampleFailed(502, f"poll returned {type(result).__name__}, not PollResult")
    events = [e for e in result.events if isinstance(e, sdk.TriggerEvent)]
    if not events:
        return samples.SampleState(
            "empty",
            source="poll",
            message="The poll found no items now: add one in the app and fetch again, "
            "or use the example.",
        )
    newest = list(reversed(events))[: samples.MAX_CANDIDATES]
    return samples.SampleState(
        "pinned",
        source="poll",
        data=newest[0].data,
        candidates=[samples.SampleEvent(e.id, e.data, dict(e.meta)) for e in newest],
        message=f"The poll found {len(events)} item(s); the newest is pinned.",
    )


async def _listen(
    env: EventEnv, definition: Any, site: TriggerSite, config: Any
) -> samples.SampleState:
    emit = _SampleEmit()
    context = env.context(site, draft=True)
    task = asyncio.create_task(definition.call("listen", config, context, emit))
    arrived = asyncio.create_task(emit.arrived.wait())
    try:
        await asyncio.wait(
            {task, arrived}, timeout=samples.FETCH_SECONDS, return_when="FIRST_COMPLETED"
        )
    finally:
        for pending in (task, arrived):
            pending.cancel()
        await asyncio.gather(task, arrived, return_exceptions=True)
    if emit.event is not None:
        event = emit.event
        return samples.SampleState(
            "pinned",
            source="listen",
            data=event.data,
            candidates=[samples.SampleEvent(event.id, event.data, dict(event.meta))],
            message="A message arrived and is pinned; it was not acknowledged, so it stays "
            "with the broker or mailbox.",
        )
    if emit.dead is not None:
        reason, raw = emit.dead
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        return samples.SampleState(
            "empty",
            source="listen",
            message=f"A message arrived that this trigger cannot read ({reason}): {text[:200]}",
        )
    if task.done() and not task.cancelled():
        error = task.exception()
        if error is None:
            raise samples.SampleFailed(502, "the subscription ended before a message arrived")
        raise failure(error, samples.FETCH_SECONDS)
    return samples.SampleState(
        "empty",
        source="listen",
        message=f"No message arrived within {samples.FETCH_SECONDS:g} s: send one, then "
        "fetch again.",
    )


async def fetch(
    env: EventEnv,
    catalog: Any,
    workflow_id: uuid.UUID,
    *,
    principal: Any,
    user_id: uuid.UUID | None,
    node_id: str | None = None,
    mode: str = "fetch",
    max_json_depth: int = 64,
) -> samples.SampleState:
    """Fetch a sample for the saved draft's trigger node (``node_id``, else its one
    trigger) and pin it (see the module doc); an app webhook answers ``listening``.

    Raises :class:`~backend.services.triggers.events.samples.SampleFailed`: 400 naming
    ``node_id`` (not a trigger of the saved draft) or ``mode`` (unknown, no example, or a
    trigger without events to fetch), 404, 409 (archived), and what the trigger's code
    failed with (400, 502, 504); and ``ReferenceNotGranted`` when the user may not use
    the node's credential.
    """
    if mode not in MODES:
        raise invalid(f"mode must be one of {', '.join(MODES)}", "mode")
    async with env.sessionmaker() as session:
        wf = await workflow_of(session, workflow_id)
        node = trigger_node(wf.draft, catalog, node_id)
        await check_user(session, principal, node, catalog)
    node_type = str(node["type"])
    definition = env.definition(node_type)
    kind = getattr(definition, "kind", None)
    if mode == "example":
        example = getattr(definition, "output_example", None)
        if example is None:
            raise invalid(f"{node_type} has no example event", "mode")
        state = samples.SampleState(
            "pinned", source="example", data=example, message="The example is pinned."
        )
    elif kind == "app_webhook":
        return await start_listening(env, workflow_id, node, user_id)
    elif kind not in ("polling", *LISTEN_KINDS):
        what = "Listen for test call" if node_type == "trigger.webhook" else "Pin data"
        raise invalid(
            f"{node_type} has no events to fetch: use {what}, or pin data by hand", "mode"
        )
    else:
        site = site_of(workflow_id, node)
        try:
            if kind == "polling":
                state = await _poll(env, definition, site, config_of(node))
            else:
                state = await _listen(env, definition, site, config_of(node))
        except Exception as exc:
            if database_unavailable(exc):
                raise
            raise failure(exc, samples.FETCH_SECONDS) from exc
    state.node_id, state.node_type, state.kind = str(node["id"]), node_type, kind
    if state.status == "pinned":
        async with env.sessionmaker() as session, session.begin():
            await pin_sample(
                env, session, workflow_id, str(node["id"]), state.data, user_id, max_json_depth
            )
    return state
