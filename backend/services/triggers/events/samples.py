"""The designer's "Fetch test event": what a sample is, and an app webhook's listening window.

A sample is an event a connector trigger's code heard for the draft, pinned on the
draft's trigger node (through ``EventEnv.pin``, i.e. :func:`backend.services.workflows.pins.pin`),
so it is the input of test runs and the data the expression editor lists fields and
previews from. Nothing here starts a run, stores an event or moves a cursor.
:mod:`backend.services.triggers.events.sample_fetch` fetches one for every kind; this module holds
the answer (:class:`SampleState`), the errors (:class:`SampleFailed`) and the window of
an app webhook:

:func:`start_listening` opens a window of :data:`LISTEN_SECONDS` on the workflow's
trigger URL (``/hooks/app/<token>``, the one URL the workflow keeps for good: a workflow
never published gets its subscription row now, disabled, so the URL exists before the
first publish). The next delivery is verified by the draft's ``receive``
(:func:`take_delivery`, called by :mod:`backend.services.triggers.events.push`): its first event
is pinned and ends the window; a delivery without an event (a handshake, an event the
trigger's settings leave out) is answered and the window stays open; a refused delivery
ends it with the refusal shown. While the workflow is live the delivery also starts its
run as every delivery does; otherwise it starts none. The window lives on the
subscription row (``sample_until``, ``sample``), so a delivery costs no extra look-up.

The trigger's code runs in the draft's context (``EventEnv.context(..., draft=True)``):
credentials are those of the draft's config, and the user asking must be allowed to use
them (checked when fetching, and for a delivery again when it arrives, as that user).
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
from backend.services.identity import access, references
from backend.services.timestamps import rfc3339
from backend.services.triggers.events.contexts import EventEnv, TriggerSite
from backend.services.triggers.events.subscriptions import connector_config
from connectors import sdk

FETCH_SECONDS = 30.0
"""Longest a poll or a wait for a broker or email message may take, in seconds."""

LISTEN_SECONDS = 120.0
"""How long an app webhook trigger listens for a test event, in seconds."""

MAX_CANDIDATES = 20
"""Events of one poll offered to pick from."""


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


def invalid(message: str, field: str) -> SampleFailed:
    return SampleFailed(400, message, "invalid_input", field)


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
            raise invalid(f"node {node_id!r} is not in the saved draft", "node_id")
        spec = catalog.get(str(node.get("type")))
        if spec is None or spec.kind != "trigger":
            raise invalid(f"node {node_id!r} is not a trigger", "node_id")
        return node
    found = [n for n in nodes if getattr(catalog.get(str(n.get("type"))), "kind", "") == "trigger"]
    if not found:
        raise invalid("the saved draft has no trigger", "node_id")
    if len(found) > 1:
        raise invalid("the draft has several triggers: name one in node_id", "node_id")
    return found[0]


SAMPLE_STEP_SUFFIX = ":test-event"
"""Added to the trigger's step id in the context a sample is fetched in. Connectors name
their broker identity after the step (``sdk.info().step_id``: a Redis consumer, an MQTT
client id), so a sample is read as a consumer of its own, beside a published
subscription's: it neither takes over that subscription's session nor leaves a message
pending where that subscription does not look for it (its broker hands it over as it
does a dead consumer's)."""


def site_of(workflow_id: uuid.UUID, node: dict[str, Any]) -> TriggerSite:
    """Where a sample of ``node`` runs: the draft (version 0), a step id of its own."""
    return TriggerSite(workflow_id, 0, f"{node['id']}{SAMPLE_STEP_SUFFIX}", str(node["type"]))


def config_of(node: dict[str, Any]) -> dict[str, Any]:
    config = node.get("config")
    return connector_config(config if isinstance(config, dict) else {})


def failure(exc: BaseException, seconds: float) -> SampleFailed:
    """The :class:`SampleFailed` of an exception the trigger's code raised (``seconds``:
    the time it had, for a timeout)."""
    if isinstance(exc, SampleFailed):
        return exc
    if isinstance(exc, TimeoutError):
        return SampleFailed(504, f"the trigger did not answer within {seconds:g} s")
    if isinstance(exc, sdk.ActionError):
        wrong_setup = isinstance(exc, sdk.ConfigError) or exc.kind.startswith("credential")
        return SampleFailed(400 if wrong_setup else 502, exc.message, exc.kind)
    return SampleFailed(502, f"the trigger failed: {type(exc).__name__}: {exc}")


async def check_user(
    session: AsyncSession, principal: Any, node: dict[str, Any], catalog: Any
) -> None:
    """Raise :class:`references.ReferenceNotGranted` when ``principal`` may not use a
    credential the trigger node names."""
    await references.check_diagram(session, principal, {"nodes": [node]}, catalog)


async def pin_sample(
    env: EventEnv,
    session: AsyncSession,
    workflow_id: uuid.UUID,
    node_id: str,
    data: Any,
    user_id: uuid.UUID | None,
    max_json_depth: int,
) -> None:
    """Pin ``data`` on the draft's ``node_id`` through ``env.pin``
    (:func:`backend.services.workflows.pins.pin`, which audits it)."""
    if env.pin is None:
        raise SampleFailed(502, "this process cannot pin data", "sample_unpinned")
    try:
        await env.pin(
            session, workflow_id, node_id, data, user_id=user_id, max_json_depth=max_json_depth
        )
    except ValueError as exc:  # over the pin limits (InvalidInput)
        raise SampleFailed(502, f"the event cannot be pinned: {exc}", "sample_too_large") from None


async def workflow_of(session: AsyncSession, workflow_id: uuid.UUID) -> Workflow:
    """The workflow (404 when there is none, 409 when it is archived)."""
    wf = await session.get(Workflow, workflow_id)
    if wf is None:
        raise SampleFailed(404, f"workflow {workflow_id} not found", "not_found")
    if wf.archived_at is not None:
        raise SampleFailed(409, f"workflow {wf.name!r} is archived: restore it first", "archived")
    return wf


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
    has no trigger URL yet); when a delivery was pinned, ``data`` is the pin (while it is
    still on the node). Raises :class:`SampleFailed` (404)."""
    async with env.sessionmaker() as session:
        wf = await session.get(Workflow, workflow_id)
        if wf is None:
            raise SampleFailed(404, f"workflow {workflow_id} not found", "not_found")
        row = (
            await session.execute(
                select(TriggerSubscription).where(TriggerSubscription.workflow_id == workflow_id)
            )
        ).scalar_one_or_none()
    if row is None:
        return SampleState("idle")
    state = _state(env, row, datetime.now(UTC))
    pinned = (wf.pinned_data or {}).get(state.node_id or "")
    if state.status == "pinned" and isinstance(pinned, dict):
        state.data = pinned.get("data")
    return state


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
                await pin_sample(env, session, row.workflow_id, node_id, data, user_id, depth)
            except SampleFailed as exc:
                outcome = {"status": "failed", "message": exc.message}
        if "deliveries" in outcome:
            outcome["deliveries"] = int(sample.get("deliveries") or 0) + 1
        row.sample = {**sample, **outcome, "received_at": rfc3339(now)}
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
        wf = await workflow_of(session, row.workflow_id)
        node = next((n for n in _nodes(wf.draft) if n.get("id") == sample.get("node_id")), None)
        if node is None or node.get("type") != sample.get("node_type"):
            raise SampleFailed(409, "the trigger node changed since listening began: fetch again")
        user = await session.get(User, user_id) if user_id else None
        if user is None or not user.is_active:
            raise SampleFailed(403, "the user who started listening is no longer active")
        try:
            principal = await access.principal_for(session, user)
            await check_user(session, principal, node, _Specs(env))
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
    budget = 0.5
    try:
        node, user_id = await _listener(env, row)
        definition = env.definition(str(node["type"]))
        if definition is None or definition.kind != "app_webhook":
            raise SampleFailed(409, f"{node['type']} is not an app webhook trigger")
        same = row.enabled and row.node_type == node["type"]
        budget = max(budget, float(definition.response_deadline) * 0.6)
        response = await asyncio.wait_for(
            definition.call(
                "receive",
                config_of(node),
                env.context(site_of(row.workflow_id, node), draft=True),
                request,
                registration if same else None,
            ),
            timeout=budget,
        )
        if not isinstance(response, sdk.PushResponse):
            raise SampleFailed(502, f"receive returned {type(response).__name__}")
    except sdk.DeliveryRefused as refused:
        message = f"A delivery was refused ({refused.status}): {refused.message}"
        await _record(env, row.id, listen_id, {"status": "refused", "message": message}, close=True)
        raise
    except Exception as exc:
        failed = failure(exc, budget)
        outcome = {"status": "failed", "message": failed.message}
        await _record(env, row.id, listen_id, outcome, close=True)
        raise failed from exc
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
