"""The front door of webhook deliveries (backend/api/webhook_front.py): an ordinary delivery
is answered without the app's route, with everything the app's layers give every request
(request id, security headers, latency histogram by route template, the app's error
answers); every other request reaches the app's route as before, its body intact. Real
PostgreSQL and Redis; the app in-process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from litestar import Litestar, Request
from prometheus_client import REGISTRY

from backend.api import webhooks
from backend.api.webhook_front import WebhookFront, delivery_target
from backend.api.webhook_parts import to_asgi
from backend.runtime import Runtime
from backend.services.triggers import webhooks as hooks
from backend.services.triggers.webhook_answers import Answer
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish

pytestmark = pytest.mark.integration


@pytest.fixture
def routed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths the app's webhook route answered (the front answered the others)."""
    seen: list[str] = []
    original = webhooks.WebhookController._receive

    async def spy(self: Any, token: str, suffix: str, request: Any) -> Any:
        seen.append(request.url.path)
        return await original(self, token, suffix, request)

    monkeypatch.setattr(webhooks.WebhookController, "_receive", spy)
    yield seen


async def _hook(client: httpx.AsyncClient, **config: Any) -> str:
    return str((await _workflow(client, **config))["webhook_path"])


async def _workflow(client: httpx.AsyncClient, **config: Any) -> dict[str, Any]:
    nodes = [
        node("hook", "trigger.webhook", **config),
        node("set_1", "control.set", mapping={"total": "=body.qty * 2"}),
    ]
    return await publish(client, diagram(nodes, [edge("hook", "set_1")]))


def _count(route: str, status: str) -> float:
    labels = {"method": "POST", "route": route, "status": status}
    value = REGISTRY.get_sample_value("railyard_http_request_duration_seconds_count", labels)
    return value or 0.0


async def test_an_ordinary_delivery_is_answered_by_the_front_with_the_apps_headers(
    client: httpx.AsyncClient, runtime: Runtime, routed: list[str]
) -> None:
    path = await _hook(client)
    before = _count("/hooks/{token}", "202")
    r = await client.post(path, json={"qty": 21}, headers={"X-Request-ID": "delivery-1"})
    assert r.status_code == 202, r.text
    assert routed == []  # not the app's route
    assert r.headers["x-request-id"] == "delivery-1"
    assert r.headers["content-security-policy"].startswith("sandbox")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["location"] == r.json()["status_url"]
    assert _count("/hooks/{token}", "202") == before + 1
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    run = (await client.get(f"/api/runs/{run_id}")).json()
    assert run["input"]["body"] == {"qty": 21}
    assert run["input"]["path"] == path
    # a fresh request id when none (or a malformed one) is sent
    r = await client.post(path, json={"qty": 1}, headers={"X-Request-ID": "bad id!"})
    assert len(r.headers["x-request-id"]) == 32 and r.headers["x-request-id"] != "bad id!"


async def test_rejections_are_answered_by_the_front_as_the_route_answers_them(
    client: httpx.AsyncClient, routed: list[str]
) -> None:
    path = await _hook(client, methods="POST", max_body=64)
    r = await client.post(path, content=b"{" + b" " * 100 + b"}")
    assert (r.status_code, r.json()["detail"]) == (413, "body larger than 64 bytes")
    r = await client.put(path, json={})
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    r = await client.post(path, content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "body"
    r = await client.post(path + "/extra", json={})
    # the suffix as the route gets it, with its leading slash
    assert (r.status_code, r.json()["detail"]) == (404, "unknown path suffix '/extra'")
    assert routed == []
    assert _count("/hooks/{token}/{suffix}", "404") >= 1


@pytest.mark.parametrize(
    ("shape", "status"),
    [
        ("unknown token", 404),
        ("trailing slash", 202),
        ("NUL in the body", 400),
        ("NUL in the query", 400),
        ("designer test URL", 404),
    ],
)
async def test_other_requests_reach_the_apps_route_with_their_body(
    client: httpx.AsyncClient, routed: list[str], shape: str, status: int
) -> None:
    path = await _hook(client)
    body: dict[str, Any] = {"qty": 2}
    url = path
    if shape == "unknown token":
        url = "/hooks/no-such-token"
    elif shape == "trailing slash":
        url = path + "/"
    elif shape == "NUL in the body":
        body = {"qty": "\u0000"}
    elif shape == "NUL in the query":
        url = path + "?x=%00"
    elif shape == "designer test URL":
        url = "/hooks/test/" + path.rsplit("/", 1)[-1]
    r = await client.post(url, json=body)
    assert r.status_code == status, r.text
    if status == 400:
        assert r.json()["field"].startswith(("body", "query"))
    if shape in ("unknown token", "trailing slash"):
        assert len(routed) == 1  # the route read the body the front handed back
    if shape == "trailing slash":
        assert r.json()["run_id"]


async def test_an_archived_workflows_webhook_is_answered_410_by_the_app(
    client: httpx.AsyncClient, routed: list[str]
) -> None:
    wf = await _workflow(client)
    path = str(wf["webhook_path"])
    assert (await client.post(f"/workflows/{wf['id']}/archive")).status_code in (302, 303)
    hooks.clear_endpoint_cache()
    r = await client.post(path, json={})
    assert r.status_code == 410
    assert routed == [path]


@pytest.mark.parametrize(
    ("error", "status"),
    [(ConnectionRefusedError(111, "Connection refused"), 503), (RuntimeError("a bug"), 500)],
)
async def test_an_error_in_a_delivery_gets_the_apps_error_answer(
    client: httpx.AsyncClient,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    status: int,
) -> None:
    path = await _hook(client)

    async def failing(*_: Any, **__: Any) -> Any:
        raise error

    monkeypatch.setattr(runtime.execution, "start_run", failing)
    before = _count("/hooks/{token}", str(status))
    r = await client.post(path, json={"qty": 1})
    assert r.status_code == status
    assert "Traceback" not in r.text and "a bug" not in r.text
    assert r.headers["x-request-id"] and r.headers["content-security-policy"].startswith("sandbox")
    if status == 503:
        assert r.headers["retry-after"] == "5"
    assert _count("/hooks/{token}", str(status)) == before + 1


@pytest.mark.parametrize(
    ("method", "path", "target"),
    [
        ("POST", "/hooks/abc", ("abc", "")),
        ("GET", "/hooks/abc/orders/new", ("abc", "/orders/new")),
        ("HEAD", "/hooks/abc", None),
        ("OPTIONS", "/hooks/abc", None),
        ("POST", "/hooks/", None),
        ("POST", "/hooks/abc/", None),
        ("POST", "/hooks/abc//x", None),
        ("POST", "/hooks/test/abc", None),
        ("POST", "/api/runs", None),
        ("POST", "/hooks/a\u0000b", None),
        ("POST", "/hooks/abc/\ud800", None),
        ("POST", "/hooks/abc/caf\u00e9", ("abc", "/caf\u00e9")),
    ],
)
def test_which_requests_the_front_may_serve(
    method: str, path: str, target: tuple[str, str] | None
) -> None:
    scope: Any = {"type": "http", "method": method, "path": path}
    assert delivery_target(scope) == target


async def test_an_endpoint_that_cannot_be_looked_up_gets_the_apps_503_from_the_front(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, routed: list[str]
) -> None:
    path = await _hook(client)

    async def unreachable(*_: Any, **__: Any) -> Any:
        raise ConnectionRefusedError(111, "Connection refused")

    hooks.clear_endpoint_cache()
    monkeypatch.setattr(hooks, "cached_endpoint", unreachable)
    before = _count("/hooks/{token}", "503")
    r = await client.post(path, json={})
    assert (r.status_code, r.headers["retry-after"]) == (503, "5")
    assert r.headers["x-request-id"] and r.headers["content-security-policy"].startswith("sandbox")
    assert routed == []  # answered once, by the front, not looked up again by the route
    assert _count("/hooks/{token}", "503") == before + 1


async def test_an_error_no_handler_answers_is_a_plain_500_without_its_text() -> None:
    async def inner(*_: Any) -> None:
        raise AssertionError("not reached")

    front = WebhookFront(Litestar([]), inner, 1024)
    scope: Any = {"type": "http", "method": "POST", "path": "/hooks/abc", "headers": []}
    answer = front._error_answer(Request(scope), RuntimeError("secret detail"))
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request", "body": b"", "more_body": False}

    await answer(scope, receive, send)
    assert sent[0]["status"] == 500
    assert b"secret detail" not in sent[1]["body"] and b"internal error" in sent[1]["body"]


async def _messages(app: Any) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(dict(message))

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    await app({"type": "http", "method": "POST"}, receive, send)
    return sent


@pytest.mark.parametrize(
    "answer",
    [
        Answer(202, b'{"run_id":"x"}', headers={"Location": "/api/runs/x"}),
        Answer(200, b"<p>hi</p>", "text/html", {"X-Mixed-Case": "v", "Vary": "a"}),
        Answer(429, b"{}", headers={"Retry-After": "30"}),
        Answer(200, b"", "text/plain"),
        Answer(200, b"<x/>", "application/xml; charset=utf-16"),
        Answer(200, b"x", ""),  # no media type: JSON, as Litestar says
        # answers that keep Litestar's response: their own type or length, no body
        Answer(200, b"a,b", headers={"content-Type": "text/csv"}),
        Answer(200, b"ab", headers={"Content-Length": "2"}),
        Answer(204, b""),
    ],
)
async def test_an_answer_sends_what_litestars_response_sends(answer: Answer) -> None:
    from litestar.response.base import ASGIResponse

    litestar = ASGIResponse(
        body=answer.body,
        status_code=answer.status,
        headers=answer.headers,
        media_type=answer.media_type,
    )
    assert await _messages(to_asgi(answer)) == await _messages(litestar)


def test_a_header_latin_1_cannot_carry_fails_when_the_answer_is_made() -> None:
    """Inside the front's error handling (webhook_front.py), as Litestar's response fails
    when built: the app's 500 answers it, not the server."""
    from litestar.response.base import ASGIResponse

    answer = Answer(200, b"{}", headers={"X-Name": "\u2713"})
    with pytest.raises(UnicodeEncodeError):
        to_asgi(answer)
    with pytest.raises(UnicodeEncodeError):
        ASGIResponse(body=b"{}", status_code=200, headers=answer.headers)
