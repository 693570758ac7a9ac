"""Case expression-large-integers-as-text: integer ids keep every digit when a Set turns
them into text, from a webhook body through the stored step output and the API."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration

IDS = (1234567890123456, 2**53 + 1, 1234567890123456789)


@pytest.mark.parametrize("order_id", IDS)
async def test_expression_large_integers_as_text(
    order_id: int, client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node(
                "set",
                "control.set",
                mapping={
                    "label": '="Order " & $string(body.order_id)',
                    "url": '="https://x/" & body.order_id',
                    "id": "=body.order_id",
                },
            ),
        ],
        [edge("hook", "set")],
    )
    wf = await publish(client, d)
    raw = b'{"order_id": ' + str(order_id).encode() + b"}"
    answer = await client.post(
        wf["webhook_path"], content=raw, headers={"content-type": "application/json"}
    )
    run_id = answer.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    out = steps_by_id(await run_detail(client, run_id))["set"]["output"]
    assert out == {"label": f"Order {order_id}", "url": f"https://x/{order_id}", "id": order_id}
