"""The designer's "Fetch test event": a connector trigger's code run once on the draft.

The sample is pinned on the draft's trigger node (:mod:`backend.services.pins`), so it is
the input of test runs and the data the expression editor lists fields and previews
from. Nothing here starts a run, stores an event or moves a cursor. By kind:

=============  ===========================================================================
kind           what :func:`fetch` does
=============  ===========================================================================
``polling``    ``poll(config, cursor=None)`` once, within :data:`FETCH_SECONDS`: the
               items as they are now (the stored cursor of a published trigger is not
               used or changed); the newest is pinned, the others (newest first, at most
               :data:`MAX_CANDIDATES`) are offered to pick from
``broker``,    ``listen(config, emit)`` until the first message, at most
``email``      :data:`FETCH_SECONDS`: ``emit`` keeps the event and raises before the
               connector acks it, so the message stays with the broker or mailbox (and
               reaches a published subscription as usual); nothing within the time is an
               ``empty`` answer saying so
``app_webhook``  opens a listening window of :data:`LISTEN_SECONDS` on the workflow's
               trigger URL (``/hooks/app/<token>``, the one URL the workflow keeps for
               good: a workflow never published gets its subscription row now, disabled,
               so the URL exists before the first publish). The next delivery is
               verified by the draft's ``receive`` (:func:`take_delivery`): its first
               event is pinned and ends the window; a handshake (no event) is answered
               and the window stays open; a refused delivery ends it with the refusal
               shown. While the workflow is live the delivery also starts its run as
               every delivery does; otherwise it starts none.
=============  ===========================================================================

``mode="example"`` pins the trigger's ``output_example`` instead, for any kind.

The trigger's code runs in the draft's context (``EventEnv.context(..., draft=True)``):
credentials are those of the draft's config, and the user asking must be allowed to use
them (checked here, for a delivery again when it arrives, as that user).
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import msgspec
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import TriggerSubscription, User, Workflow
from backend.services import access, references
from backend.services.events.contexts import EventEnv, TriggerSite
from backend.services.events.kinds import LISTEN_KINDS
from backend.services.events.subscriptions import connector_config
from connectors import sdk

FETCH_SECONDS = 30.0
"""Longest a poll or a wait for a broker or email message may take, in seconds."""

LISTEN_SECONDS = 120.0
"""How long an app webhook trigger listens for a test event, in seconds."""

MAX_CANDIDATES = 20
"""Events of one poll offered to pick from."""

MODES = ("fetch", "example")


class SampleEvent(msgspec.Struct):
    """One event a sample fetch heard: its ``id`` (the dedupe key), ``data`` (the run
    input it would start) and ``meta`` (delivery id, message id, ...)."""

    id: str
    data: Any = None
    meta: dict[str, str] = {}


class SampleState(msgspec.Struct):
    """Where a "Fetch test event" stands, as the designer shows it.

    Attributes:
        status: ``pinned`` (``data`` is pinned on ``node_id``), ``empty`` (nothing
            arrived or was there: ``message`` says what), ``listening`` (an app webhook
            waits until ``listening_until``), ``refused`` (a delivery was refused:
            ``message`` has the status and reason), ``failed`` (the trigger's code
            failed), ``idle`` (nothing asked).
        kind: the trigger's kind (``polling``, ``app_webhook``, ``broker``, ``email``).
        source: where the data came from: ``poll``, ``listen``, ``delivery``, ``example``.
        candidates: a poll's events, newest first (the first is the pinned one).
        url: the trigger URL deliveries go to (app webhooks; ``None`` before the first
            fetch or publish).
        deliveries: deliveries heard in the window that had no event (handshakes,
            events the trigger's filters leave out).
    """

    status: str
    node_id: str | None = None
    node_type: str | None = None
    kind: str | None = None
    source: str | None = None
    message: str = ""
    data: Any = None
    candidates: list[SampleEvent] = []
    url: str | None = None
    listening_until: datetime | None = None
    received_at: datetime | None = None
    deliveries: int = 0


class SampleFailed(Exception):
    """No sample could be fetched.

    Attributes:
        status: the HTTP status to answer: 400 (the request, or the node's config or
            credential, is wrong: ``field`` says where when the request is), 403 (the
            user may not use the node's credential), 404 (no such workflow), 409 (the
            workflow is archived, or the node changed meanwhile), 502 (the trigger or the
            app it calls failed, e.g. the vendor answered 401), 504 (no answer within
            :data:`FETCH_SECONDS`).
        message: what the panel shows.
        kind: the connector's error kind (``credential_missing``, ``http_401``, ...).
        field: the request field at fault (``node_id``, ``mode``), if one is.
    """

    def __init__(
        self, status: int, message: str, kind: str = "error", field: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.field = field


def _invalid(message: str, field: str) -> SampleFailed:
    return SampleFailed(400, message, "invalid_input", field)


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


def _nodes(draft: Any) -> list[dict[str, Any]]:
    nodes = draft.get("nodes") if isinstance(draft, dict) else None
    return [n for n in nodes or [] if isinstance(n, dict)]


def trigger_node(draft: Any, catalog: Any, node_id: str | None) -> dict[str, Any]:
    """The trigger node of the saved ``draft`` (a diagram dict): ``node_id``, or the
    draft's one trigger when ``None``. Raises :class:`SampleFailed` (400, field
    ``node_id``) when there is no such node, it is no trigger, or several triggers leave
    it open."""
    nodes = _nodes(draft)
    if node_id is not None:
        node = next((n for n in nodes if n.get("id") == node_id), None)
        if node is None:
            raise _invalid(f"node {node_id!r} is not in the saved draft", "node_id")
        spec = catalog.get(str(node.get("type")))
        if spec is None or spec.kind != "trigger":
            raise _invalid(f"node {node_id!r} is not a trigger", "node_id")
        return node
    found = [n for n in nodes if getattr(catalog.get(str(n.get("type"))), "kind", "") == "trigger"]
    if not found:
        raise _invalid("the saved draft has no trigger", "node_id")
    if len(found) > 1:
        raise _invalid("the draft has several triggers: name one in node_id", "node_id")
    return found[0]


def _site(workflow_id: uuid.UUID, node: dict[str, Any]) -> TriggerSite:
    return TriggerSite(workflow_id, 0, str(node["id"]), str(node["type"]))


def _config(node: dict[str, Any]) -> dict[str, Any]:
    config = node.get("config")
    return connector_config(config if isinstance(config, dict) else {})


def _failure(exc: BaseException) -> SampleFailed:
    """The :class:`SampleFailed` of an exception the trigger's code raised."""
    if isinstance(exc, SampleFailed):
        return exc
    if isinstance(exc, TimeoutError):
        return SampleFailed(504, f"the trigger did not answer within {FETCH_SECONDS:g} s")
    if isinstance(exc, sdk.ActionError):
        wrong_setup = isinstance(exc, sdk.ConfigError) or exc.kind.startswith("credential")
        return SampleFailed(400 if wrong_setup else 502, exc.message, exc.kind)
    return SampleFailed(502, f"the trigger failed: {type(exc).__name__}: {exc}")


async def _check_user(
    session: AsyncSession, principal: Any, node: dict[str, Any], catalog: Any
) -> None:
    """Raise :class:`references.ReferenceNotGranted` when ``principal`` may not use a
    credential the trigger node names."""
    await references.check_diagram(session, principal, {"nodes": [node]}, catalog)


async def _pin(
    env: EventEnv,
    session: AsyncSession,
    workflow_id: uuid.UUID,
    node_id: str,
    data: Any,
    user_id: uuid.UUID | None,
    max_json_depth: int,
) -> None:
    """Pin ``data`` on the draft's ``node_id`` through ``env.pin``
    (:func:`backend.services.pins.pin`, which audits it)."""
    if env.pin is None:
        raise SampleFailed(502, "this process cannot pin data", "sample_unpinned")
    try:
        await env.pin(
            session, workflow_id, node_id, data, user_id=user_id, max_json_depth=max_json_depth
        )
    except ValueError as exc:  # over the pin limits (InvalidInput)
        raise SampleFailed(502, f"the event cannot be pinned: {exc}", "sample_too_large") from None


async def _workflow(session: AsyncSession, workflow_id: uuid.UUID) -> Workflow:
    """The workflow (404 when there is none, 409 when it is archived)."""
    wf = await session.get(Workflow, workflow_id)
    if wf is None:
        raise SampleFailed(404, f"workflow {workflow_id} not found", "not_found")
    if wf.archived_at is not None:
        raise SampleFailed(409, f"workflow {wf.name!r} is archived: restore it first", "archived")
    return wf


async def _poll(env: EventEnv, definition: Any, site: TriggerSite, config: Any) -> SampleState:
    result = await asyncio.wait_for(
        definition.call("poll", config, env.context(site, draft=True), None), FETCH_SECONDS
    )
    if not isinstance(result, sdk.PollResult):
        raise SampleFailed(502, f"poll returned {type(result).__name__}, not PollResult")
    events = [e for e in result.events if isinstance(e, sdk.TriggerEvent)]
    if not events:
        return SampleState(
            "empty",
            source="poll",
            message="The poll found no items now: add one in the app and fetch again, "
            "or use the example.",
        )
    newest = list(reversed(events))[:MAX_CANDIDATES]
    return SampleState(
        "pinned",
        source="poll",
        data=newest[0].data,
        candidates=[SampleEvent(e.id, e.data, dict(e.meta)) for e in newest],
        message=f"The poll found {len(events)} item(s); the newest is pinned.",
    )


async def _listen(env: EventEnv, definition: Any, site: TriggerSite, config: Any) -> SampleState:
    emit = _SampleEmit()
    context = env.context(site, draft=True)
    task = asyncio.create_task(definition.call("listen", config, context, emit))
    arrived = asyncio.create_task(emit.arrived.wait())
    try:
        await asyncio.wait({task, arrived}, timeout=FETCH_SECONDS, return_when="FIRST_COMPLETED")
    finally:
        for pending in (task, arrived):
            pending.cancel()
        await asyncio.gather(task, arrived, return_exceptions=True)
    if emit.event is not None:
        event = emit.event
        return SampleState(
            "pinned",
            source="listen",
            data=event.data,
            candidates=[SampleEvent(event.id, event.data, dict(event.meta))],
            message="A message arrived and is pinned; it was not acknowledged, so it stays "
            "with the broker or mailbox.",
        )
    if emit.dead is not None:
        reason, raw = emit.dead
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        return SampleState(
            "empty",
            source="listen",
            message=f"A message arrived that this trigger cannot read ({reason}): {text[:200]}",
        )
    if task.done() and not task.cancelled():
        error = task.exception()
        if error is None:
            raise SampleFailed(502, "the subscription ended before a message arrived")
        raise _failure(error)
    return SampleState(
        "empty",
        source="listen",
        message=f"No message arrived within {FETCH_SECONDS:g} s: send one, then fetch again.",
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
) -> SampleState:
    """Fetch a sample for the saved draft's trigger node (``node_id``, else its one
    trigger) and pin it (see the module doc); an app webhook answers ``listening``.

    Raises :class:`SampleFailed`: 400 naming ``node_id`` (not a trigger of the saved
    draft) or ``mode`` (unknown, no example, or a trigger without events to fetch), 404,
    409 (archived), and what the trigger's code failed with (400, 502, 504); and
    ``ReferenceNotGranted`` when the user may not use the node's credential.
    """
    if mode not in MODES:
        raise _invalid(f"mode must be one of {', '.join(MODES)}", "mode")
    async with env.sessionmaker() as session:
        wf = await _workflow(session, workflow_id)
        node = trigger_node(wf.draft, catalog, node_id)
        await _check_user(session, principal, node, catalog)
    node_type = str(node["type"])
    definition = env.definition(node_type)
    kind = getattr(definition, "kind", None)
    if mode == "example":
        example = getattr(definition, "output_example", None)
        if example is None:
            raise _invalid(f"{node_type} has no example event", "mode")
        state = SampleState(
            "pinned", source="example", data=example, message="The example is pinned."
        )
    elif kind == "app_webhook":
        return await start_listening(env, workflow_id, node, user_id)
    elif kind not in ("polling", *LISTEN_KINDS):
        what = "Listen for test call" if node_type == "trigger.webhook" else "Pin data"
        raise _invalid(
            f"{node_type} has no events to fetch: use {what}, or pin data by hand", "mode"
        )
    else:
        site = _site(workflow_id, node)
        try:
            if kind == "polling":
                state = await _poll(env, definition, site, _config(node))
            else:
                state = await _listen(env, definition, site, _config(node))
        except Exception as exc:
            raise _failure(exc) from exc
    state.node_id, state.node_type, state.kind = str(node["id"]), node_type, kind
    if state.status == "pinned":
        async with env.sessionmaker() as session, session.begin():
            await _pin(
                env, session, workflow_id, str(node["id"]), state.data, user_id, max_json_depth
            )
    return state


# ---------------------------------------------------------------------- app webhooks


async def _row(session: AsyncSession, workflow_id: uuid.UUID) -> TriggerSubscription | None:
    return (
        await session.execute(
            select(TriggerSubscription)
            .where(TriggerSubscription.workflow_id == workflow_id)
            .with_for_update()
        )
    ).scalar_one_or_none()


async def start_listening(
    env: EventEnv, workflow_id: uuid.UUID, node: dict[str, Any], user_id: uuid.UUID | None
) -> SampleState:
    """Open (or re-open) the app webhook listening window of ``workflow_id`` for its
    trigger ``node`` for :data:`LISTEN_SECONDS` (see the module doc); returns the
    ``listening`` state with the URL."""
    now = datetime.now(UTC)
    async with env.sessionmaker() as session, session.begin():
        row = await _row(session, workflow_id)
        if row is None:  # never published: the URL it will keep is made now
            row = TriggerSubscription(
                workflow_id=workflow_id,
                token=secrets.token_urlsafe(24),
                version_number=0,
                step_id=str(node["id"]),
                node_type=str(node["type"]),
                kind="app_webhook",
                config={},
                revision=0,
                enabled=False,
                failures=0,
                registration_status="none",
            )
            session.add(row)
        row.sample_until = now + timedelta(seconds=LISTEN_SECONDS)
        row.sample = {
            "listen_id": secrets.token_hex(8),
            "node_id": str(node["id"]),
            "node_type": str(node["type"]),
            "user_id": str(user_id) if user_id else None,
            "status": "listening",
            "message": "",
            "deliveries": 0,
        }
        await session.flush()
        return _state(env, row, now)


def listening(row: TriggerSubscription, now: datetime) -> bool:
    """Whether ``row``'s app webhook listening window is open at ``now``."""
    return row.sample_until is not None and row.sample_until > now


def _state(env: EventEnv, row: TriggerSubscription, now: datetime) -> SampleState:
    sample = dict(row.sample or {})
    open_ = listening(row, now)
    received = sample.get("received_at")
    return SampleState(
        "listening" if open_ else str(sample.get("status") or "idle").replace("listening", "idle"),
        node_id=sample.get("node_id"),
        node_type=sample.get("node_type"),
        kind="app_webhook" if sample else row.kind,
        source="delivery" if sample.get("status") == "pinned" else None,
        message=str(sample.get("message") or ""),
        url=env.url(row.token),
        listening_until=row.sample_until if open_ else None,
        received_at=datetime.fromisoformat(received) if isinstance(received, str) else None,
        deliveries=int(sample.get("deliveries") or 0),
    )


async def sample_state(env: EventEnv, workflow_id: uuid.UUID) -> SampleState:
    """The workflow's app webhook listening state (``idle`` with no URL when the workflow
    has no trigger URL yet). Raises :class:`SampleFailed` (404)."""
    async with env.sessionmaker() as session:
        if await session.get(Workflow, workflow_id) is None:
            raise SampleFailed(404, f"workflow {workflow_id} not found", "not_found")
        row = (
            await session.execute(
                select(TriggerSubscription).where(TriggerSubscription.workflow_id == workflow_id)
            )
        ).scalar_one_or_none()
    if row is None:
        return SampleState("idle")
    return _state(env, row, datetime.now(UTC))


async def stop_listening(env: EventEnv, workflow_id: uuid.UUID) -> SampleState:
    """Close the listening window (nothing was received: the state becomes ``idle``)."""
    now = datetime.now(UTC)
    async with env.sessionmaker() as session, session.begin():
        row = await _row(session, workflow_id)
        if row is None:
            return SampleState("idle")
        if listening(row, now):
            row.sample_until = None
            row.sample = {**(row.sample or {}), "status": "idle", "message": "Stopped listening."}
        return _state(env, row, now)


async def _record(
    env: EventEnv,
    row_id: uuid.UUID,
    listen_id: str,
    outcome: dict[str, Any],
    *,
    close: bool,
    pin: tuple[str, Any, uuid.UUID | None, int] | None = None,
) -> None:
    """Write a delivery's outcome into the window ``listen_id`` (if it is still the open
    one) and pin its data (``(node id, data, user id, max depth)``), in one transaction."""
    now = datetime.now(UTC)
    async with env.sessionmaker() as session, session.begin():
        row = await session.get(TriggerSubscription, row_id, with_for_update=True)
        if row is None or not listening(row, now):
            return
        sample = dict(row.sample or {})
        if sample.get("listen_id") != listen_id:
            return
        if pin is not None:
            node_id, data, user_id, depth = pin
            try:
                await _pin(env, session, row.workflow_id, node_id, data, user_id, depth)
            except SampleFailed as exc:
                outcome = {"status": "failed", "message": exc.message}
        if "deliveries" in outcome:
            outcome["deliveries"] = int(sample.get("deliveries") or 0) + 1
        row.sample = {**sample, **outcome, "received_at": now.isoformat()}
        if close:
            row.sample_until = None


class _Specs:
    """The catalog as :func:`references.references` reads it, for connector triggers:
    each one's config schema (where its credential fields are)."""

    def __init__(self, env: EventEnv) -> None:
        self.env = env

    def get(self, node_type: str) -> Any:
        definition = self.env.definition(node_type)
        if definition is None:
            return None
        return SimpleNamespace(config_schema=definition.config_json_schema())


async def _listener(
    env: EventEnv, row: TriggerSubscription
) -> tuple[dict[str, Any], uuid.UUID | None]:
    """The draft's trigger node the window listens for, and the user who asked; raises
    :class:`SampleFailed` when the node changed or the user may no longer use its
    credential."""
    sample = dict(row.sample or {})
    raw_user = sample.get("user_id")
    user_id = uuid.UUID(raw_user) if isinstance(raw_user, str) else None
    async with env.sessionmaker() as session:
        wf = await _workflow(session, row.workflow_id)
        node = next((n for n in _nodes(wf.draft) if n.get("id") == sample.get("node_id")), None)
        if node is None or node.get("type") != sample.get("node_type"):
            raise SampleFailed(409, "the trigger node changed since listening began: fetch again")
        user = await session.get(User, user_id) if user_id else None
        if user is None or not user.is_active:
            raise SampleFailed(403, "the user who started listening is no longer active")
        try:
            principal = await access.principal_for(session, user)
            await _check_user(session, principal, node, _Specs(env))
        except references.ReferenceNotGranted as exc:
            raise SampleFailed(403, str(exc), "credential_not_granted") from None
    return node, user_id


async def take_delivery(
    env: EventEnv,
    row: TriggerSubscription,
    request: sdk.PushRequest,
    registration: sdk.Registration | None,
    *,
    max_json_depth: int = 64,
) -> sdk.PushResponse:
    """Hand a delivery that arrived while ``row`` listens to the draft's ``receive``
    (see the module doc) and keep the outcome; returns the connector's answer.

    ``registration`` is the published trigger's (used when the draft's node type is the
    published one). Raises :class:`connectors.sdk.DeliveryRefused` as ``receive`` does,
    and :class:`SampleFailed` when the draft's trigger cannot take it (the answer is then
    the caller's: a live workflow goes on as usual)."""
    sample = dict(row.sample or {})
    listen_id = str(sample.get("listen_id") or "")
    try:
        node, user_id = await _listener(env, row)
        definition = env.definition(str(node["type"]))
        if definition is None or definition.kind != "app_webhook":
            raise SampleFailed(409, f"{node['type']} is not an app webhook trigger")
        same = row.enabled and row.node_type == node["type"]
        deadline = float(getattr(definition, "response_deadline", 10.0))
        response = await asyncio.wait_for(
            definition.call(
                "receive",
                _config(node),
                env.context(_site(row.workflow_id, node), draft=True),
                request,
                registration if same else None,
            ),
            timeout=max(0.5, deadline * 0.6),
        )
        if not isinstance(response, sdk.PushResponse):
            raise SampleFailed(502, f"receive returned {type(response).__name__}")
    except sdk.DeliveryRefused as refused:
        message = f"A delivery was refused ({refused.status}): {refused.message}"
        await _record(env, row.id, listen_id, {"status": "refused", "message": message}, close=True)
        raise
    except Exception as exc:
        failure = _failure(exc)
        outcome = {"status": "failed", "message": failure.message}
        await _record(env, row.id, listen_id, outcome, close=True)
        raise failure from exc
    events = [e for e in response.events if isinstance(e, sdk.TriggerEvent)]
    if not events:
        note = (
            "A delivery without an event arrived (a handshake, or an event the trigger's "
            "settings leave out); still listening."
        )
        await _record(env, row.id, listen_id, {"message": note, "deliveries": 0}, close=False)
        return response
    first = events[0]
    outcome = {"status": "pinned", "message": f"Event {first.id} arrived and is pinned."}
    pin = (str(node["id"]), first.data, user_id, max_json_depth)
    await _record(env, row.id, listen_id, outcome, close=True, pin=pin)
    return response
