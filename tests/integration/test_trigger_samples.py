"""The designer's "Fetch test event" on real PostgreSQL and Redis: a polling trigger polled
once, a broker message read without its ack, an app webhook's next delivery heard while
the designer listens (before and after the first publish), the example; each pinned on
the draft's trigger node and offered to the field picker; connector errors answered with
their message; nothing stored as an event and no run started but by a live workflow."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

import httpx
import msgspec
import pytest
import pytest_asyncio
from sqlalchemy import func, select

from backend.db.models import Run, TriggerEventRow, TriggerSubscription
from backend.runtime import Runtime
from backend.services.triggers.events import samples
from backend.services.triggers.events.lifecycle import run_lifecycle_pass
from backend.settings import Settings
from connectors import sdk
from tests.diagrams import diagram, edge, node
from tests.integration.rbac import client_as, grant, make_user

pytestmark = pytest.mark.integration


class App:
    """The state of the app the sample triggers read."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.fail: Exception | None = None
        self.polls: list[Any] = []
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.acked: list[str] = []
        self.keys: list[str] = []
        self.consumers: list[str] = []


APP = App()


class KeyFields(msgspec.Struct):
    key: Annotated[str, sdk.secret("Key")]


KEY = sdk.credential_type("sample.key", label="Sample key", fields=KeyFields)


class PollConfig(msgspec.Struct):
    credential: Annotated[str, sdk.credential_meta("sample.key")] = ""
    tag: str = ""


@sdk.polling_trigger(
    "sample.items",
    label="Sample: new item",
    config=PollConfig,
    interval=60,
    min_interval=1,
    output_example={"id": "example", "title": "An example item"},
)
async def items(config: PollConfig, cursor: Any) -> sdk.PollResult:
    """Every item (oldest first); a credential's key is recorded."""
    APP.polls.append(cursor)
    if config.credential:
        APP.keys.append(sdk.credential("credential")["key"])
    if APP.fail is not None:
        raise APP.fail
    events = [sdk.TriggerEvent(id=i["id"], data={**i, "tag": config.tag}) for i in APP.items]
    return sdk.PollResult(events=events, cursor=len(APP.items))


class PushConfig(msgspec.Struct):
    secret: str = "s3cret"
    only: str = ""


@sdk.app_webhook_trigger("sample.pushed", label="Sample: pushed", config=PushConfig)
async def pushed(
    config: PushConfig, request: sdk.PushRequest, registration: sdk.Registration | None
) -> sdk.PushResponse:
    """Signed JSON deliveries (``x-signature``); ``{"challenge": x}`` is echoed; events of
    another ``kind`` than ``only`` (when set) are left out."""
    sdk.verify_hmac(config.secret, request.body, request.headers.get("x-signature", ""))
    body = request.json()
    if "challenge" in body:
        return sdk.PushResponse(body=body["challenge"])
    if config.only and body.get("kind") != config.only:
        return sdk.PushResponse()
    return sdk.PushResponse(
        events=[sdk.TriggerEvent(id=body["id"], data=body, meta={"delivery_id": body["id"]})]
    )


async def _register(config: PushConfig, url: str) -> sdk.Registration:
    return sdk.Registration(remote_id="hook-1", secret="issued-by-the-app")


@sdk.app_webhook_trigger(
    "sample.hooked", label="Sample: hooked", config=PushConfig, register=_register
)
async def hooked(
    config: PushConfig, request: sdk.PushRequest, registration: sdk.Registration | None
) -> sdk.PushResponse:
    """Deliveries signed with the secret the app issued when the hook was registered."""
    secret = registration.secret if registration else ""
    sdk.verify_hmac(secret, request.body, request.headers.get("x-signature", ""))
    body = request.json()
    return sdk.PushResponse(events=[sdk.TriggerEvent(id=body["id"], data=body)])


@sdk.listen_trigger("sample.queue", label="Sample: queue", kind="broker")
async def queue(config: object, emit: sdk.Emit) -> None:
    """Messages from the app's queue, acked after emit returns; the consumer is named
    after the step, as broker triggers name theirs."""
    APP.consumers.append(sdk.info().step_id)
    while True:
        message_id, payload = await APP.queue.get()
        if payload is None:
            await emit.dead_letter("not JSON", b"\xffgarbage", {"message_id": message_id})
        else:
            await emit(sdk.TriggerEvent(id=message_id, data=payload))
        APP.acked.append(message_id)


SAMPLE = sdk.Connector(
    name="sample",
    label="Sample",
    version="1.0",
    triggers=[items, pushed, hooked, queue],
    credential_types=[KEY],
)


@pytest_asyncio.fixture
async def events(runtime: Runtime) -> AsyncIterator[Runtime]:
    """The runtime with the sample connector and a fresh app."""
    global APP
    APP = App()
    if "sample.items" not in runtime.catalog.triggers:
        runtime.catalog.add_connector(SAMPLE, source="extra")
    from backend.services.triggers import webhooks

    webhooks.accept_connector_triggers(runtime.catalog.triggers)
    yield runtime


def _flow(trigger: str, **config: Any) -> dict[str, Any]:
    return diagram(
        [node("t", trigger, **config), node("s", "control.set", mapping={"seen": "=$"})],
        [edge("t", "s")],
    )


async def _draft(client: httpx.AsyncClient, trigger: str, **config: Any) -> str:
    wf = (await client.post("/api/workflows", json={"name": f"Sample {trigger}"})).json()
    saved = await client.put(
        f"/api/workflows/{wf['id']}/draft", json={"diagram": _flow(trigger, **config)}
    )
    assert saved.status_code == 200, saved.text
    return str(wf["id"])


async def _fetch(client: httpx.AsyncClient, wf: str, **body: Any) -> httpx.Response:
    return await client.post(f"/api/workflows/{wf}/trigger-sample", json=body)


async def _pins(client: httpx.AsyncClient, wf: str) -> dict[str, Any]:
    return {k: v["data"] for k, v in (await client.get(f"/api/workflows/{wf}/pins")).json().items()}


async def _count(runtime: Runtime, model: Any, wf: str) -> int:
    async with runtime.sessionmaker() as session:
        query = select(func.count()).select_from(model).where(model.workflow_id == uuid.UUID(wf))
        return int((await session.execute(query)).scalar_one())


async def test_a_poll_pins_the_newest_item_and_starts_nothing(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    APP.items = [{"id": "a", "n": 1}, {"id": "b", "n": 2}, {"id": "c", "n": 3}]
    wf = await _draft(client, "sample.items", tag="x", poll_interval=5)
    answer = await _fetch(client, wf)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert (got["status"], got["source"], got["kind"], got["node_id"]) == (
        "pinned",
        "poll",
        "polling",
        "t",
    )
    assert got["data"] == {"id": "c", "n": 3, "tag": "x"}
    assert [c["id"] for c in got["candidates"]] == ["c", "b", "a"]
    assert APP.polls == [None]  # from no cursor, with the connector's config only
    assert await _pins(client, wf) == {"t": {"id": "c", "n": 3, "tag": "x"}}
    assert await _count(events, Run, wf) == 0
    assert await _count(events, TriggerEventRow, wf) == 0
    assert await _count(events, TriggerSubscription, wf) == 0

    # the sample stands in for the trigger's output in the field picker and previews
    d = _flow("sample.items", tag="x")
    fields = (
        await client.post(
            f"/api/workflows/{wf}/expressions/fields", json={"diagram": d, "node_id": "s"}
        )
    ).json()
    assert fields["data_from"] == "pinned data"
    trigger = next(g for g in fields["sources"] if g["prefix"] == "$trigger")
    assert {f["path"] for f in trigger["fields"]} >= {"id", "n", "tag"}
    assert trigger["examples"]["n"] == "3"
    preview = (
        await client.post(
            f"/api/workflows/{wf}/expressions/preview",
            json={"diagram": d, "node_id": "s", "expression": "=n * 2"},
        )
    ).json()
    assert (preview["value"], preview["data_from"]) == (6, "pinned data")

    # the pin is the input of a test run
    test = await client.post(f"/api/workflows/{wf}/test-runs", json={})
    assert test.status_code == 201 and test.json()["input_source"] == "pinned"

    APP.items = []
    empty = (await _fetch(client, wf)).json()
    assert empty["status"] == "empty" and "no items" in empty["message"]
    assert await _pins(client, wf) == {"t": {"id": "c", "n": 3, "tag": "x"}}  # kept


async def test_connector_errors_are_answered_with_their_message(
    events: Runtime, client: httpx.AsyncClient, settings: Settings
) -> None:
    wf = await _draft(client, "sample.items", credential=str(uuid.uuid4()))
    missing = await _fetch(client, wf)
    assert missing.status_code == 400, missing.text
    assert "does not exist" in missing.json()["detail"]
    assert missing.json()["kind"] == "credential_missing"

    created = await client.post(
        "/api/credentials", json={"name": "App key", "type": "sample.key", "data": {"key": "k1"}}
    )
    assert created.status_code == 201, created.text
    cred = created.json()["id"]
    wf = await _draft(client, "sample.items", credential=cred)
    APP.fail = sdk.NonRetryableError("the app answered 401: invalid key", kind="http_401")
    refused = await _fetch(client, wf)
    assert refused.status_code == 502, refused.text
    assert refused.json()["detail"] == "the app answered 401: invalid key"
    assert refused.json()["kind"] == "http_401"
    assert APP.keys == ["k1"]  # the draft's credential was resolved for the trigger

    APP.fail = RuntimeError("boom")
    broken = await _fetch(client, wf)
    assert broken.status_code == 502 and "RuntimeError: boom" in broken.json()["detail"]

    # an editor who may not use the credential is refused before the trigger runs
    editor_id = await make_user(events, "ed@example.com", "editor")
    await grant(events, "workflow", wf, f"user:{editor_id}", "edit")
    async with client_as(settings, events, "ed@example.com") as editor:
        denied = await _fetch(editor, wf)
    assert denied.status_code == 403, denied.text
    assert APP.keys == ["k1", "k1"]  # the trigger did not run for the editor

    bad_node = await _fetch(client, wf, node_id="s")
    assert (bad_node.status_code, bad_node.json()["field"]) == (400, "node_id")
    unknown = await _fetch(client, wf, node_id="nope")
    assert (unknown.status_code, unknown.json()["field"]) == (400, "node_id")
    assert (await client.delete(f"/api/workflows/{wf}")).status_code == 204
    archived = await _fetch(client, wf)
    assert archived.status_code == 409


async def test_the_example_is_pinned_when_asked(events: Runtime, client: httpx.AsyncClient) -> None:
    wf = await _draft(client, "sample.items")
    got = (await _fetch(client, wf, mode="example")).json()
    assert (got["status"], got["source"], got["data"]) == (
        "pinned",
        "example",
        {"id": "example", "title": "An example item"},
    )
    assert await _pins(client, wf) == {"t": {"id": "example", "title": "An example item"}}
    assert APP.polls == []
    none = await _fetch(client, await _draft(client, "sample.queue"), mode="example")
    assert (none.status_code, none.json()["field"]) == (400, "mode")
    webhook = await _draft(client, "trigger.webhook")
    refused = await _fetch(client, webhook)
    assert refused.status_code == 400 and "Listen for test call" in refused.json()["detail"]


async def test_a_broker_message_is_pinned_without_its_ack(
    events: Runtime, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    wf = await _draft(client, "sample.queue")
    await APP.queue.put(("m1", {"order": 7}))
    got = (await _fetch(client, wf)).json()
    assert (got["status"], got["source"], got["data"]) == ("pinned", "listen", {"order": 7})
    assert got["candidates"][0]["id"] == "m1"
    assert APP.acked == []  # emit raised before the ack: the message stays with the broker
    assert APP.consumers == ["t:test-event"]  # not the published subscription's identity
    assert await _pins(client, wf) == {"t": {"order": 7}}
    assert await _count(events, TriggerEventRow, wf) == 0

    await APP.queue.put(("m2", None))
    letter = (await _fetch(client, wf)).json()
    assert letter["status"] == "empty" and "cannot read (not JSON)" in letter["message"]
    assert APP.acked == []

    monkeypatch.setattr(samples, "FETCH_SECONDS", 0.3)
    quiet = (await _fetch(client, wf)).json()
    assert quiet == {**quiet, "status": "empty"}
    assert "No message arrived within 0.3 s" in quiet["message"]


def _signed(body: dict[str, Any], secret: str = "s3cret") -> tuple[bytes, dict[str, str]]:
    raw = msgspec.json.encode(body)
    return raw, {"x-signature": sdk.hmac_hex(secret, raw), "content-type": "application/json"}


async def _state(client: httpx.AsyncClient, wf: str) -> dict[str, Any]:
    answer = await client.get(f"/api/workflows/{wf}/trigger-sample")
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_an_app_webhook_listens_for_the_next_delivery_before_and_after_publishing(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await _draft(client, "sample.pushed", only="order")
    assert (await _state(client, wf))["status"] == "idle"
    assert (await _state(client, wf))["url"] is None
    started = (await _fetch(client, wf)).json()
    assert started["status"] == "listening" and started["listening_until"]
    url = started["url"]
    assert url.startswith("http://testserver.local/hooks/app/")
    path = url.removeprefix("http://testserver.local")

    raw, headers = _signed({"challenge": "c1"})
    handshake = await client.post(path, content=raw, headers=headers)
    assert (handshake.status_code, handshake.text) == (200, "c1")
    raw, headers = _signed({"id": "Ev0", "kind": "other"})
    filtered = await client.post(path, content=raw, headers=headers)
    assert filtered.status_code == 200
    state = await _state(client, wf)
    assert (state["status"], state["deliveries"]) == ("listening", 2)

    raw, headers = _signed({"id": "Ev1", "kind": "order", "total": 9})
    first = await client.post(path, content=raw, headers=headers)
    assert first.status_code == 200, first.text
    state = await _state(client, wf)
    assert (state["status"], state["source"], state["node_id"]) == ("pinned", "delivery", "t")
    assert state["data"] == {"id": "Ev1", "kind": "order", "total": 9}
    assert "Ev1" in state["message"]
    assert await _pins(client, wf) == {"t": {"id": "Ev1", "kind": "order", "total": 9}}
    assert await _count(events, Run, wf) == 0 and await _count(events, TriggerEventRow, wf) == 0
    # the window closed: the URL of a workflow never published answers 410 again
    again = await client.post(path, content=raw, headers=headers)
    assert again.status_code == 410
    page = await client.get(f"/workflows/{wf}/trigger")
    assert "Not published yet" in page.text

    # a refused delivery ends the window with the refusal shown
    await _fetch(client, wf)
    bad = await client.post(path, content=raw, headers={"x-signature": "0" * 64})
    assert bad.status_code == 401
    state = await _state(client, wf)
    assert state["status"] == "refused" and "(401)" in state["message"]

    # stopping closes the window
    await _fetch(client, wf)
    stopped = (await client.post(f"/api/workflows/{wf}/trigger-sample/stop")).json()
    assert stopped["status"] == "idle"

    # publishing keeps the URL; a delivery while listening is pinned and starts its run
    assert (await client.post(f"/api/workflows/{wf}/publish")).status_code == 201
    assert (await _fetch(client, wf)).json()["url"] == url
    raw, headers = _signed({"id": "Ev2", "kind": "order", "total": 3})
    live = await client.post(path, content=raw, headers=headers)
    assert live.status_code == 200, live.text
    assert await _pins(client, wf) == {"t": {"id": "Ev2", "kind": "order", "total": 3}}
    runs = await _count(events, Run, wf)
    assert runs == 1 and live.headers["x-railyard-run-ids"]
    run_id = live.headers["x-railyard-run-ids"]
    run_page = await client.get(f"/runs/{run_id}")
    assert "Vendor delivery id" in run_page.text and "Ev2" in run_page.text


async def test_a_redis_stream_entry_is_pinned_and_left_pending(
    events: Runtime, client: httpx.AsyncClient, settings: Settings
) -> None:
    """The built-in Redis Streams trigger against the real Redis: the entry read for the
    sample is pinned, not acked, and pending on a consumer of its own."""
    stream = f"orders-{uuid.uuid4().hex[:8]}"
    wf = await _draft(
        client,
        "redis_streams.message_received",
        url=settings.redis_url,
        stream=stream,
        start="all",
        payload="json",
    )
    entry = await events.redis.xadd(stream, {"payload": '{"order": 1042}', "source": "shop"})
    got = (await _fetch(client, wf)).json()
    assert got["status"] == "pinned", got
    assert got["data"]["payload"] == {"order": 1042}
    assert got["candidates"][0]["id"] == f"{stream}:{entry.decode()}"
    pending = await events.redis.xpending(stream, "railyard")
    assert pending["pending"] == 1  # read for the sample, never acked
    [(consumer, count)] = [(c["name"].decode(), c["pending"]) for c in pending["consumers"]]
    assert count == 1
    # a consumer of its own, not the one a published subscription of step "t" reads as
    assert consumer == _stable_name(wf, "t:test-event") != _stable_name(wf, "t")
    assert await _count(events, TriggerEventRow, wf) == 0


def _stable_name(workflow_id: str, step_id: str) -> str:
    """The consumer name the Redis Streams trigger derives from its workflow and step."""
    digest = hashlib.sha256(f"{workflow_id}\x00{step_id}".encode()).hexdigest()
    return f"railyard-{digest[:14]}"


async def test_a_registered_hook_is_heard_with_the_published_registration(
    events: Runtime, client: httpx.AsyncClient
) -> None:
    wf = await _draft(client, "sample.hooked")
    path = (await _fetch(client, wf)).json()["url"].removeprefix("http://testserver.local")
    raw, headers = _signed({"id": "Ev1"}, "issued-by-the-app")
    # not registered yet: nothing issued the secret, so the delivery cannot be verified
    assert (await client.post(path, content=raw, headers=headers)).status_code == 401
    assert (await _state(client, wf))["status"] == "refused"

    assert (await client.post(f"/api/workflows/{wf}/publish")).status_code == 201
    await run_lifecycle_pass(events.events, events.execution.clock)
    assert (await _fetch(client, wf)).json()["status"] == "listening"
    answer = await client.post(path, content=raw, headers=headers)
    assert answer.status_code == 200, answer.text
    assert (await _state(client, wf))["data"] == {"id": "Ev1"}
    assert await _count(events, Run, wf) == 1  # live: the delivery started its run too
