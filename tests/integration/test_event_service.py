"""The event service on real PostgreSQL and Redis: polling, app webhook and listening
triggers start exactly one run per event; lifecycle hooks follow the active version;
a trigger nothing can run is refused at publish; a connector webhook trigger is served."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import msgspec
import pytest
import pytest_asyncio
from sqlalchemy import func, select

from backend.db.models import (
    Run,
    TriggerDeadLetter,
    TriggerEventRow,
    TriggerRetirement,
    TriggerSubscription,
)
from backend.runtime import Runtime
from backend.services.operations import retention
from backend.services.triggers.events import inbox
from backend.services.triggers.events.lifecycle import run_lifecycle_pass
from backend.services.triggers.events.listeners import Listeners
from backend.services.triggers.events.polling import poll_due
from backend.services.triggers.events.push import open_registration
from backend.settings import Settings
from connectors import sdk
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish
from tests.integration.retention_rows import by_class, rules

pytestmark = pytest.mark.integration


class Vendor:
    """An app's state the demo triggers read: items to poll, hooks registered, a queue."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.fail: sdk.ActionError | None = None
        self.polls: list[Any] = []
        self.hooks: dict[str, str] = {}
        self.unregistered: list[str] = []
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.acked: list[str] = []


VENDOR = Vendor()
SECRET = "whsec-demo"


class Feed(msgspec.Struct):
    tag: str = ""


@sdk.polling_trigger("demo.new_item", label="New item", config=Feed, interval=60, min_interval=1)
async def new_item(config: Feed, cursor: int | None) -> sdk.PollResult:
    """Items after the cursor (their position); the cursor is the last position seen."""
    VENDOR.polls.append(cursor)
    if VENDOR.fail is not None:
        raise VENDOR.fail
    start = cursor or 0
    # an overlapping page, as many APIs answer: the item before the cursor again
    page = VENDOR.items[max(0, start - 1) :]
    events = [sdk.TriggerEvent(id=i["id"], data={**i, "tag": config.tag}) for i in page]
    return sdk.PollResult(events=events, cursor=len(VENDOR.items))


@sdk.polling_trigger(
    "demo.slow_feed", label="Slow feed", config=Feed, interval=120, min_interval=60
)
async def slow_feed(config: Feed, cursor: int | None) -> sdk.PollResult:
    """A feed that may not be polled more often than once a minute; fails as told."""
    VENDOR.polls.append(cursor)
    if VENDOR.fail is not None:
        raise VENDOR.fail
    return sdk.PollResult(events=[], cursor=cursor)


async def _register(config: Feed, url: str) -> sdk.Registration:
    remote = f"hook-{len(VENDOR.hooks) + 1}"
    VENDOR.hooks[remote] = url
    return sdk.Registration(remote_id=remote, secret=SECRET)


async def _check(config: Feed, registration: sdk.Registration) -> bool:
    return registration.remote_id in VENDOR.hooks


async def _unregister(config: Feed, registration: sdk.Registration) -> None:
    VENDOR.hooks.pop(registration.remote_id, None)
    VENDOR.unregistered.append(registration.remote_id)


@sdk.app_webhook_trigger(
    "demo.pushed",
    label="Pushed",
    config=Feed,
    register=_register,
    check=_check,
    unregister=_unregister,
    response_deadline=3,
)
async def pushed(
    config: Feed, request: sdk.PushRequest, registration: sdk.Registration | None
) -> sdk.PushResponse:
    """Signed JSON deliveries; ``{"challenge": x}`` is echoed."""
    body = request.json()
    if isinstance(body, dict) and "challenge" in body:
        return sdk.PushResponse(body=body["challenge"])
    secret = registration.secret if registration else ""
    sdk.verify_hmac(secret, request.body, request.headers.get("x-signature", ""))
    return sdk.PushResponse(
        events=[sdk.TriggerEvent(id=body["id"], data=body, meta={"delivery_id": body["id"]})]
    )


@sdk.listen_trigger("demo.queue", label="Queue", kind="broker")
async def queue(config: object, emit: sdk.Emit) -> None:
    """Messages from the vendor's queue, acked after emit returns."""
    while True:
        message_id, payload = await VENDOR.queue.get()
        if payload is None:
            await emit.dead_letter("not JSON", b"\xffgarbage", {"message_id": message_id})
        else:
            await emit(sdk.TriggerEvent(id=message_id, data=payload))
        VENDOR.acked.append(message_id)


hook = sdk.trigger("demo.hook", label="Hook")
broken = sdk.TriggerDefinition(
    type="demo.broken", label="Broken", kind="schedule", config_type=Feed
)

DEMO = sdk.Connector(
    name="demo",
    label="Demo",
    version="1.0",
    triggers=[new_item, slow_feed, pushed, queue, hook, broken],
)


@pytest_asyncio.fixture
async def events(runtime: Runtime) -> AsyncIterator[Runtime]:
    """The runtime with the demo connector and a fresh vendor."""
    global VENDOR
    VENDOR = Vendor()
    if "demo.new_item" not in runtime.catalog.triggers:
        runtime.catalog.add_connector(DEMO, source="extra")
    from backend.services.triggers import webhooks

    webhooks.accept_connector_triggers(runtime.catalog.triggers)
    yield runtime


def _flow(trigger: str, **config: Any) -> dict[str, Any]:
    return diagram(
        [node("t", trigger, **config), node("s", "control.set", mapping={"seen": "=$"})],
        [edge("t", "s")],
    )


async def _subscription(runtime: Runtime, workflow_id: str) -> TriggerSubscription:
    async with runtime.sessionmaker() as session:
        row = (
            await session.execute(
                select(TriggerSubscription).where(
                    TriggerSubscription.workflow_id == uuid.UUID(workflow_id)
                )
            )
        ).scalar_one()
        return row


async def _runs(runtime: Runtime, workflow_id: str) -> list[Run]:
    async with runtime.sessionmaker() as session:
        return list(
            (
                await session.execute(
                    select(Run)
                    .where(Run.workflow_id == uuid.UUID(workflow_id))
                    .order_by(Run.created_at)
                )
            ).scalars()
        )


async def _make_due(runtime: Runtime, workflow_id: str) -> None:
    async with runtime.sessionmaker() as session, session.begin():
        row = (
            await session.execute(
                select(TriggerSubscription).where(
                    TriggerSubscription.workflow_id == uuid.UUID(workflow_id)
                )
            )
        ).scalar_one()
        row.next_poll_at = runtime.execution.clock.now() - timedelta(seconds=1)


async def test_polling_starts_from_now_then_one_run_per_new_item(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    VENDOR.items = [{"id": "a"}, {"id": "b"}]
    wf = await publish(client, _flow("demo.new_item", tag="x", poll_interval=0.2))
    sub = await _subscription(events, wf["id"])
    assert (sub.kind, sub.interval_seconds, sub.baseline_taken) == ("polling", 1.0, False)

    assert await poll_due(events.events, events.execution.clock) == 0  # the baseline
    sub = await _subscription(events, wf["id"])
    assert (sub.cursor, sub.baseline_taken, sub.last_polled_at is not None) == (2, True, True)
    assert await _runs(events, wf["id"]) == []

    VENDOR.items += [{"id": "c"}, {"id": "d"}]
    await _make_due(events, wf["id"])
    assert await poll_due(events.events, events.execution.clock) == 2
    runs = await _runs(events, wf["id"])
    assert [r.input for r in runs] == [{"id": "c", "tag": "x"}, {"id": "d", "tag": "x"}]
    assert {r.trigger for r in runs} == {"polling"}
    assert (await _subscription(events, wf["id"])).cursor == 4

    # the overlapping page and a re-poll from an old cursor start nothing more
    await _make_due(events, wf["id"])
    assert await poll_due(events.events, events.execution.clock) == 0
    async with events.sessionmaker() as session, session.begin():
        row = await session.get(TriggerSubscription, sub.id)
        assert row is not None
        row.cursor = 0
        row.next_poll_at = events.execution.clock.now()
    assert await poll_due(events.events, events.execution.clock) == 0
    assert len(await _runs(events, wf["id"])) == 2
    assert VENDOR.polls[-1] == 0


async def test_polling_includes_existing_items_when_asked(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    VENDOR.items = [{"id": "a"}, {"id": "b"}]
    wf = await publish(client, _flow("demo.new_item", include_existing=True))
    assert await poll_due(events.events, events.execution.clock) == 2
    assert [r.input["id"] for r in await _runs(events, wf["id"])] == ["a", "b"]


async def test_a_failed_poll_backs_off_honouring_retry_after_and_is_shown(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await publish(client, _flow("demo.new_item"))
    VENDOR.fail = sdk.ActionError("rate limited (429)", kind="http_429", retry_after=120)
    before = events.execution.clock.now()
    await poll_due(events.events, events.execution.clock)
    sub = await _subscription(events, wf["id"])
    assert sub.last_error == "rate limited (429)" and sub.failures == 1
    assert sub.next_poll_at is not None
    assert sub.next_poll_at - before >= timedelta(seconds=119)
    page = await client.get(f"/workflows/{wf['id']}/trigger")
    assert "rate limited (429)" in page.text

    VENDOR.fail = None
    await _make_due(events, wf["id"])
    await poll_due(events.events, events.execution.clock)
    sub = await _subscription(events, wf["id"])
    assert (sub.last_error, sub.failures) == (None, 0)


async def test_a_failing_poll_is_never_retried_sooner_than_the_triggers_floor(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await publish(client, _flow("demo.slow_feed", include_existing=True))
    VENDOR.fail = sdk.ActionError("the vendor answered 503", kind="http_503")
    delays = []
    for _ in range(6):
        await _make_due(events, wf["id"])
        before = events.execution.clock.now()
        await poll_due(events.events, events.execution.clock)
        sub = await _subscription(events, wf["id"])
        assert sub.next_poll_at is not None
        delays.append(round((sub.next_poll_at - before).total_seconds()))
    assert delays == [60, 60, 60, 60, 80, 160]  # max(60 s floor, 5 s doubling)
    assert len(VENDOR.polls) == 6
    VENDOR.fail = sdk.ActionError("rate limited (429)", kind="http_429", retry_after=600)
    await _make_due(events, wf["id"])
    before = events.execution.clock.now()
    await poll_due(events.events, events.execution.clock)
    sub = await _subscription(events, wf["id"])
    assert sub.next_poll_at is not None
    assert round((sub.next_poll_at - before).total_seconds()) == 600  # Retry-After wins


async def test_stored_events_without_a_run_are_started_by_the_sweep(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await publish(client, _flow("demo.new_item"))
    source = inbox.Source(uuid.UUID(wf["id"]), 1, "demo.new_item", "polling")
    earlier = events.execution.clock.now() - timedelta(minutes=1)
    async with events.sessionmaker() as session, session.begin():
        ids = await inbox.insert_events(
            session, source, [sdk.TriggerEvent(id="x", data={"n": 1})], earlier
        )
        again = await inbox.insert_events(
            session, source, [sdk.TriggerEvent(id="x", data={"n": 1})], earlier
        )
    assert len(ids) == 1 and again == []
    now = events.execution.clock.now()
    assert await inbox.start_pending(events.sessionmaker, events.execution, now) == 1
    assert await inbox.start_pending(events.sessionmaker, events.execution, now) == 0
    # a start repeated after a crash (the row not yet linked) is the same run
    first = await inbox.start_runs(events.sessionmaker, events.execution, ids)
    assert first == {}
    runs = await _runs(events, wf["id"])
    assert len(runs) == 1 and runs[0].idempotency_key == f"trigger-event:{ids[0]}"


def _refused(metrics: str, reason: str) -> float:
    """``railyard_trigger_deliveries_refused_total{reason}`` in a /metrics text (0 when
    nothing was refused for that reason yet)."""
    prefix = f'railyard_trigger_deliveries_refused_total{{reason="{reason}"}} '
    line = next((line for line in metrics.splitlines() if line.startswith(prefix)), None)
    return float(line.removeprefix(prefix)) if line else 0.0


def _signed(body: dict[str, Any], secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    raw = msgspec.json.encode(body)
    return raw, {"x-signature": sdk.hmac_hex(secret, raw), "content-type": "application/json"}


async def test_app_webhook_registers_verifies_dedupes_and_retires(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await publish(client, _flow("demo.pushed", tag="one"))
    sub = await _subscription(events, wf["id"])
    assert sub.registration_status == "pending"
    await run_lifecycle_pass(events.events, events.execution.clock)
    sub = await _subscription(events, wf["id"])
    registration = open_registration(sub.workflow_id, sub.registration)
    assert sub.registration_status == "registered" and registration is not None
    assert VENDOR.hooks == {"hook-1": f"http://testserver.local/hooks/app/{sub.token}"}
    assert SECRET.encode() not in (sub.registration or b"")  # encrypted at rest
    url = f"/hooks/app/{sub.token}"
    signature_refusals = _refused((await client.get("/metrics")).text, "signature")

    challenge = await client.post(url, json={"challenge": "c-123"})
    assert (challenge.status_code, challenge.text) == (200, "c-123")

    raw, headers = _signed({"id": "Ev1", "text": "hi"})
    first = await client.post(url, content=raw, headers=headers)
    assert first.status_code == 200, first.text
    again = await client.post(url, content=raw, headers=headers)  # the vendor's retry
    assert again.status_code == 200
    runs = await _runs(events, wf["id"])
    assert [r.input for r in runs] == [{"id": "Ev1", "text": "hi"}]
    assert runs[0].trigger == "app_webhook"
    assert first.headers["x-railyard-run-ids"] == str(runs[0].id)
    run_page = await client.get(f"/runs/{runs[0].id}")
    assert 'id="trigger-event"' in run_page.text and "Vendor delivery id" in run_page.text

    unsigned = await client.post(url, content=raw, headers={"content-type": "application/json"})
    wrong = await client.post(url, content=raw, headers={"x-signature": "0" * 64})
    oversized = await client.post(url, content=b"x" * (events.settings.webhook_max_body + 1))
    unknown = await client.post("/hooks/app/nope", content=raw, headers=headers)
    assert [r.status_code for r in (unsigned, wrong, oversized, unknown)] == [401, 401, 413, 404]
    assert unsigned.json()["status"] == 401
    assert unsigned.json()["detail"] == "the delivery is not signed"
    assert len(await _runs(events, wf["id"])) == 1
    metrics = (await client.get("/metrics")).text
    assert _refused(metrics, "signature") == signature_refusals + 2  # counters are per process
    assert 'railyard_trigger_deliveries_refused_total{reason="size"}' in metrics

    page = await client.get(f"/workflows/{wf['id']}/trigger")
    assert "registered" in page.text and sub.token in page.text and "Ev1" in page.text
    designer = await client.get(f"/workflows/{wf['id']}/designer")
    assert 'id="trigger-status-link"' in designer.text

    # a new config registers a new hook and retires the old one
    await client.put(
        f"/api/workflows/{wf['id']}/draft", json={"diagram": _flow("demo.pushed", tag="two")}
    )
    republished = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert republished.status_code in (200, 201), republished.text
    await run_lifecycle_pass(events.events, events.execution.clock)
    assert VENDOR.unregistered == ["hook-1"] and list(VENDOR.hooks) == ["hook-2"]
    async with events.sessionmaker() as session:
        left = (await session.execute(select(func.count()).select_from(TriggerRetirement))).scalar()
    assert left == 0

    # archived: the hook is deleted and deliveries answer 410
    assert (await client.delete(f"/api/workflows/{wf['id']}")).status_code == 204
    await run_lifecycle_pass(events.events, events.execution.clock)
    assert VENDOR.hooks == {}
    gone = await client.post(url, content=raw, headers=headers)
    assert gone.status_code == 410


async def test_app_webhook_registration_failures_are_retried_and_shown(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await publish(client, _flow("demo.pushed"))
    original = VENDOR.hooks

    class Refusing(dict[str, str]):
        def __setitem__(self, key: str, value: str) -> None:
            raise sdk.ActionError("the vendor answered 503", kind="http_503")

    VENDOR.hooks = Refusing()
    await run_lifecycle_pass(events.events, events.execution.clock)
    sub = await _subscription(events, wf["id"])
    assert sub.registration_status == "failed" and sub.failures == 1
    assert "the vendor answered 503" in (sub.last_error or "")
    assert sub.next_check_at is not None
    VENDOR.hooks = original
    async with events.sessionmaker() as session, session.begin():
        row = await session.get(TriggerSubscription, sub.id)
        assert row is not None
        row.next_check_at = events.execution.clock.now()
    await run_lifecycle_pass(events.events, events.execution.clock)
    sub = await _subscription(events, wf["id"])
    assert (sub.registration_status, sub.last_error) == ("registered", None)


async def test_listener_acks_after_the_run_is_stored_and_keeps_dead_letters(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await publish(client, _flow("demo.queue"))
    listeners = Listeners(events.events, events.execution.clock, "test-owner", lease_seconds=5)
    await listeners.reconcile()
    assert len(listeners.running) == 1
    other = Listeners(events.events, events.execution.clock, "other-owner", lease_seconds=5)
    assert await other.claim() == {}  # held by one process at a time
    for message_id, payload in [("m1", {"n": 1}), ("m2", None), ("m1", {"n": 1}), ("m3", {"n": 3})]:
        await VENDOR.queue.put((message_id, payload))
    for _ in range(100):
        if len(VENDOR.acked) == 4:
            break
        await asyncio.sleep(0.05)
    assert VENDOR.acked == ["m1", "m2", "m1", "m3"]
    runs = await _runs(events, wf["id"])
    assert sorted(r.input["n"] for r in runs) == [1, 3]
    assert {r.trigger for r in runs} == {"broker"}
    async with events.sessionmaker() as session:
        letters = list((await session.execute(select(TriggerDeadLetter))).scalars())
        linked = (
            await session.execute(
                select(func.count())
                .select_from(TriggerEventRow)
                .where(TriggerEventRow.run_id.is_not(None))
            )
        ).scalar()
    assert [(d.reason, d.encoding, d.meta) for d in letters] == [
        ("not JSON", "base64", {"message_id": "m2"})
    ]
    assert linked == 2
    page = await client.get(f"/workflows/{wf['id']}/trigger")
    assert "not JSON" in page.text
    await listeners.stop()
    assert (await other.claim()).keys() == {(await _subscription(events, wf["id"])).id}
    await other.stop()


async def test_a_trigger_nothing_can_run_is_refused_at_publish(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    created = await client.post("/api/workflows", json={"name": "broken"})
    wf = created.json()
    await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": _flow("demo.broken")})
    refused = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert refused.status_code in (400, 422), refused.text
    assert "trigger_unrunnable" in refused.text and "demo.broken" in refused.text


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis://:secret@127.0.0.1:6379/0", "put it in a credential"),
        ("http://127.0.0.1:6379/0", "must start with redis://, rediss://"),
    ],
)
async def test_a_broker_url_that_cannot_work_is_refused_at_publish(
    events: Runtime, client: httpx.AsyncClient, url: str, says: str
) -> None:
    flow = _flow("redis_streams.message_received", url=url, stream="orders")
    wf = (await client.post("/api/workflows", json={"name": "bad url"})).json()
    saved = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": flow})
    problems = [(d["code"], d["node_id"], d["field"]) for d in saved.json()["diagnostics"]]
    assert ("invalid_config", "t", "url") in problems, saved.text
    refused = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert refused.status_code in (400, 422), refused.text
    assert "invalid_config" in refused.text and says in refused.text
    assert "secret" not in refused.text


async def test_the_designer_badge_is_reloaded_with_the_real_state_after_publish(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = (await client.post("/api/workflows", json={"name": "badge"})).json()
    saved = await client.put(
        f"/api/workflows/{wf['id']}/draft", json={"diagram": _flow("demo.queue")}
    )
    assert saved.json()["ok"], saved.text
    before = await client.get(f"/workflows/{wf['id']}/designer")
    box = re.search(r'<span id="trigger-status-box"([^>]*)>(.*?)</span>', before.text, re.S)
    assert box is not None and ">Trigger status</a>" in box.group(2)  # not published yet
    # designer.js announces each publish; htmx then reloads the box from hx-get
    assert 'hx-trigger="trigger-published from:body"' in box.group(1)
    assert 'hx-select="#trigger-status-box"' in box.group(1)
    source = (await client.get("/static/js/designer.js")).text
    assert 'dispatchEvent(new CustomEvent("trigger-published"))' in source
    reload_url = re.search(r'hx-get="([^"]+)"', box.group(1))
    assert reload_url is not None

    assert (await client.post(f"/api/workflows/{wf['id']}/publish")).status_code == 201
    after = await client.get(reload_url.group(1))
    badge = re.search(r'<a id="trigger-status-link"[^>]*>([^<]*)</a>', after.text)
    assert badge is not None and badge.group(1) == "Trigger: pending"  # no events process yet


async def test_a_connector_webhook_trigger_is_served(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await publish(client, _flow("demo.hook"))
    answer = await client.post(wf["webhook_path"], json={"x": 1})
    assert answer.status_code == 202, answer.text
    runs = await _runs(events, wf["id"])
    assert len(runs) == 1 and runs[0].input["body"] == {"x": 1}


async def test_retention_forgets_old_trigger_events_and_dead_letters(
    events: Runtime, client: httpx.AsyncClient, settings: Settings
) -> None:
    wf = await publish(client, _flow("demo.queue"))
    source = inbox.Source(uuid.UUID(wf["id"]), 1, "demo.queue", "broker")
    now = events.execution.clock.now()
    async with events.sessionmaker() as session, session.begin():
        for received, name in ((now - timedelta(days=100), "old"), (now, "new")):
            await inbox.insert_events(session, source, [sdk.TriggerEvent(id=name)], received)
            await inbox.insert_dead_letter(session, source, name, b"x", {}, received)
    results = await retention.run_pass(events.sessionmaker, rules(settings, retention_runs_days=90))
    assert by_class(results)["trigger_events"].deleted == 2
    async with events.sessionmaker() as session:
        kept = (await session.execute(select(TriggerEventRow.dedupe_key))).scalars().all()
        letters = (await session.execute(select(TriggerDeadLetter.reason))).scalars().all()
    assert (kept, letters) == (["new"], ["new"])
