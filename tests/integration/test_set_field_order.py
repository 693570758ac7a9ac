"""A webhook answering with a Set's output gets the fields in the Set's order, though the
run's values pass through PostgreSQL ``jsonb`` (which sorts object keys its own way)."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish

FIELDS = [
    {"name": "zeta", "value": "=body.qty * 2"},
    {"name": "alpha", "value": "first"},
    {"name": "mid", "value": "=body.name"},
]


async def test_webhook_answer_keeps_the_set_order(client: httpx.AsyncClient, worker: Any) -> None:
    wf = await publish(
        client,
        diagram(
            [
                node("hook", "trigger.webhook", respond="last_step", wait_timeout=20),
                node("shape", "control.set", mapping=FIELDS),
            ],
            [edge("hook", "shape")],
        ),
    )
    resp = await client.post(wf["webhook_path"], json={"qty": 3, "name": "Ada"})
    assert resp.status_code == 200, resp.text
    assert list(json.loads(resp.text)) == ["zeta", "alpha", "mid"], resp.text
