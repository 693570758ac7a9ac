"""A value an expression computes that PostgreSQL cannot store (U+0000, a lone surrogate)
fails that step with a non-retryable error naming the field and the character; the run
follows its normal failure path, inline on the API and on a worker alike. A refusal that
still reaches the database ends the run instead of being retried forever."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.engine import expressions
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

COMPUTED = [
    # (Set's expression for mapping.s, the webhook body, the character named)
    ("=$decodeUrlComponent(body.s)", {"s": "a%00b"}, "U+0000 (NUL)"),
    ('=$base64decode("AA==")', {}, "U+0000 (NUL)"),
    ('="\\ud800"', {}, "U+D800 (a lone surrogate)"),
    ('={"deep": [1, $decodeUrlComponent("%00")]}', {}, "U+0000 (NUL)"),
]


def hook_then_set(expression: str, *more: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Webhook -> Set ``mapping.s = expression`` (``options``: the Set's step options);
    ``more``: further nodes, each fed by the Set's error port."""
    nodes = [
        node("hook", "trigger.webhook"),
        node("set", "control.set", mapping={"s": expression}, **options),
        *more,
    ]
    edges = [edge("hook", "set"), *(edge("set", n["id"], source_port="error") for n in more)]
    return diagram(nodes, edges)


def assert_unstorable_error(step: dict[str, Any], field: str, character: str) -> None:
    error = step["error"]
    assert step["status"] == "failed", step
    assert error["kind"] == "expression_error", error
    assert error["field"] == field, error
    assert (
        f"'{field}': the value contains {character}, which cannot be stored" in (error["message"])
    ), error


@pytest.mark.parametrize(("expression", "body", "character"), COMPUTED)
async def test_api_unstorable_computed_value_fails_the_step(
    client: httpx.AsyncClient,
    runtime: Runtime,
    expression: str,
    body: dict[str, Any],
    character: str,
) -> None:
    """Webhook -> Set, run inline by the API: the webhook is accepted (the caller sent
    nothing wrong) and the run fails at the Set step, which names the field."""
    wf = await publish(client, hook_then_set(expression))
    r = await client.post(wf["webhook_path"], json=body)
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    field = "mapping.s.deep[1]" if "deep" in expression else "mapping.s"
    assert_unstorable_error(steps_by_id(await run_detail(client, run_id))["set"], field, character)


async def test_api_unstorable_computed_value_takes_the_error_branch(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """With ``on_error: error_port`` the failure is routed like any other step error."""
    handled = node("handled", "control.set", mapping={"ok": True})
    wf = await publish(client, hook_then_set('="\\ud800"', handled, on_error="error_port"))
    run_id = (await client.post(wf["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["handled"]["status"] == "succeeded", steps["handled"]
    assert_unstorable_error(steps["set"], "mapping.s", "U+D800 (a lone surrogate)")


def delayed_set(expression: str) -> dict[str, Any]:
    """Webhook -> Delay (1 s, so a worker runs the Set) -> Set ``mapping.s = expression``."""
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("nap", "control.delay", seconds=1),
            node("set", "control.set", mapping={"s": expression}),
        ],
        [edge("hook", "nap"), edge("nap", "set")],
    )


async def test_worker_unstorable_computed_value_fails_the_step(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, delayed_set("=$decodeUrlComponent(body.s)"))
    run_id = (await client.post(wf["webhook_path"], json={"s": "a%00b"})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    steps = steps_by_id(await run_detail(client, run_id))
    assert steps["nap"]["status"] == "succeeded", steps["nap"]
    assert_unstorable_error(steps["set"], "mapping.s", "U+0000 (NUL)")


async def test_worker_database_refusal_ends_the_run(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should a value PostgreSQL refuses still reach it (the engine's check is switched
    off here), the worker fails the run once instead of retrying the job forever."""
    monkeypatch.setattr(expressions, "storable_problem", lambda value, path: None)
    wf = await publish(client, delayed_set('=$base64decode("AA==")'))
    run_id = (await client.post(wf["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    detail = await run_detail(client, run_id)
    assert detail["error"]["kind"] == "unstorable_value", detail["error"]
    assert "cannot be stored" in detail["error"]["message"], detail["error"]


async def test_api_unstorable_error_message_is_stored_with_a_replacement(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    """An error message quoting such a character (diagnostic text) is stored with U+FFFD."""
    wf = await publish(client, hook_then_set('=$error($decodeUrlComponent("a%00b"))'))
    r = await client.post(wf["webhook_path"], json={})
    assert r.status_code == 202, r.text
    assert await wait_for_run(runtime, r.json()["run_id"]) == "failed"
    step = steps_by_id(await run_detail(client, r.json()["run_id"]))["set"]
    assert "a\ufffdb" in step["error"]["message"], step["error"]
