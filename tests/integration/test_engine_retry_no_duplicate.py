"""Case engine-retry-no-duplicate.md for the HTTP action, on a real worker.

A: a step that succeeds is called exactly once, with one attempt, even with a retry
policy of 5 attempts. B: the endpoint stores the call and answers 500 first, 200 after:
two calls carrying the same Idempotency-Key, success on attempt 2, and the run output
comes from attempt 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.fakes.apis import LocalApi, Recorded, Reply
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration

RETRY = {"max_attempts": 5, "initial_interval": 5.0, "backoff_coefficient": 1.0, "jitter": 0.0}


class Orders(LocalApi):
    """Stores every order; the first ``fail_first`` calls answer 500 after storing."""

    def __init__(self, fail_first: int) -> None:
        super().__init__()
        self.fail_first = fail_first
        self.stored: list[Any] = []

    def route(self, req: Recorded) -> Reply:
        self.stored.append(req.body)
        n = len(self.stored)
        if n <= self.fail_first:
            return 500, {}, b'{"error": "database hiccup"}'
        return 201, {}, json.dumps({"order": n, "attempt_seen": n}).encode()


@pytest.fixture
def orders_factory() -> Iterator[Any]:
    started: list[Orders] = []

    def make(fail_first: int) -> Orders:
        api = Orders(fail_first)
        api.start()
        started.append(api)
        return api

    yield make
    for api in started:
        api.stop()


def _diagram(url: str) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("post", "http.request", method="POST", url=url, body={"sku": "A1"}, retry=RETRY),
        ],
        [edge("hook", "post")],
    )


async def test_engine_retry_no_duplicate(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, orders_factory: Any
) -> None:
    # Input A: success on the first call -> exactly one call, one attempt.
    ok = orders_factory(fail_first=0)
    wf = await publish(client, _diagram(ok.url + "/orders"))
    run_a = (await client.post(wf["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_a) == "succeeded"
    assert len(ok.requests) == 1
    step = steps_by_id(await run_detail(client, run_a))["post"]
    assert [a["status"] for a in step["attempts"]] == ["succeeded"]

    # Input B: stored then 500, then 200 -> two calls with one idempotency key.
    flaky = orders_factory(fail_first=1)
    wf = await publish(client, _diagram(flaky.url + "/orders"))
    run_b = (await client.post(wf["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_b, timeout=30) == "succeeded"
    assert len(flaky.requests) == 2
    keys = {r.headers["idempotency-key"] for r in flaky.requests}
    assert keys == {f"{run_b}:post"}
    detail = await run_detail(client, run_b)
    step = steps_by_id(detail)["post"]
    assert [a["status"] for a in step["attempts"]] == ["failed", "succeeded"]
    assert step["attempts"][0]["error"]["kind"] == "http_500"
    assert step["output"]["body"] == {"order": 2, "attempt_seen": 2}
    assert step["output"]["status"] == 201
