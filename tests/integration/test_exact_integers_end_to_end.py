"""Integers beyond 2^53 stay exact from a webhook body through expressions, the stored
step output and the API's answer; an expression that cannot keep them exact fails the
step naming the field (backend/engine/expression_numbers.py). Real PostgreSQL, Redis and
worker."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration

ID = 1234567890123456789  # 19 digits, as Discord and Twitter ids


async def _post(client: httpx.AsyncClient, wf: dict[str, Any], raw: bytes) -> str:
    answer = await client.post(
        wf["webhook_path"], content=raw, headers={"content-type": "application/json"}
    )
    assert answer.status_code == 202, answer.text
    return str(answer.json()["run_id"])


async def test_integers_beyond_2_53_stay_exact_end_to_end(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    mapping = {
        "next": "=body.id + 1",
        "double": "=body.id * 2",
        "same": f"=body.id = {ID}",
        "neighbour": f"=body.id = {ID - 1}",
        "bigger": "=body.id > 1234567890123456788",
        "last_digit": "=body.id % 10",
        "label": '="Order " & (body.id + 1)',
        "parsed": '=$number("9007199254740993")',
    }
    wf = await publish(
        client,
        diagram(
            [node("hook", "trigger.webhook"), node("set", "control.set", mapping=mapping)],
            [edge("hook", "set")],
        ),
    )
    run_id = await _post(client, wf, b'{"id": ' + str(ID).encode() + b"}")
    assert await wait_for_run(runtime, run_id) == "succeeded"
    out = steps_by_id(await run_detail(client, run_id))["set"]["output"]
    assert out == {
        "next": ID + 1,
        "double": ID * 2,
        "same": True,
        "neighbour": False,
        "bigger": True,
        "last_digit": 9,
        "label": f"Order {ID + 1}",
        "parsed": 2**53 + 1,
    }


async def test_an_inexact_result_fails_the_step_naming_the_field(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(
        client,
        diagram(
            [
                node("hook", "trigger.webhook"),
                node("set", "control.set", mapping={"half": "=body.id / 2"}),
            ],
            [edge("hook", "set")],
        ),
    )
    run_id = await _post(client, wf, b'{"id": ' + str(ID).encode() + b"}")
    assert await wait_for_run(runtime, run_id) == "failed"
    error = steps_by_id(await run_detail(client, run_id))["set"]["error"]
    assert error["kind"] == "expression_error"
    assert error["field"] == "mapping.half"
    assert "2^53" in error["message"]
