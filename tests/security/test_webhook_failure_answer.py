"""Finding 9: a webhook whose run fails answers its caller with a generic body.

The caller of a waiting webhook (Respond step or last step) used to get the run's error:
kind, field and message of a failed expression, so anonymous callers learned the
workflow's internals. Now every version of ``trigger.webhook`` answers 500 with the run
id and status only; version 3's explicit ``failure_answer: detailed`` adds the error, and
an older version's graph never does, whatever its config holds.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from backend.db.models import WorkflowVersion
from backend.runtime import Runtime
from backend.services.triggers.webhooks import clear_endpoint_cache
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish, run_detail

pytestmark = pytest.mark.integration


def _failing(**hook: Any) -> dict[str, Any]:
    """Webhook (waiting for the last step) -> a Set whose expression fails at run time."""
    return diagram(
        [
            node("hook", "trigger.webhook", respond="last_step", wait_timeout=20, **hook),
            node("price", "control.set", mapping={"secret_field": "=$number(body.price)"}),
        ],
        [edge("hook", "price")],
    )


async def test_failed_run_answers_a_generic_body(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _failing())
    anonymous = httpx.AsyncClient(transport=client._transport, base_url=str(client.base_url))
    async with anonymous:
        r = await anonymous.post(wf["webhook_path"], json={"price": "not a number"})
    assert r.status_code == 500, r.text
    body = r.json()
    assert body == {"run_id": body["run_id"], "status": "failed", "detail": "the run failed"}
    error = (await run_detail(client, body["run_id"]))["error"]
    assert error and error["message"]  # the run itself keeps the whole error
    for internal in (error["message"], error["kind"], "secret_field", "$number", "price"):
        assert internal not in r.text


async def test_detailed_answer_is_an_explicit_choice(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish(client, _failing(failure_answer="detailed"))
    r = await client.post(wf["webhook_path"], json={"price": "not a number"})
    assert r.status_code == 500, r.text
    body = r.json()
    assert body["status"] == "failed" and body["error"]["kind"], body


async def test_older_webhook_versions_answer_generic_whatever_their_config(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """A graph pinning version 1 or 2 (published before version 3) with the key in its
    config anyway: still the generic answer."""
    wf = await publish(client, _failing(failure_answer="detailed"))
    for pinned in (1, 2):
        async with runtime.sessionmaker() as session, session.begin():
            version = (
                await session.execute(
                    select(WorkflowVersion).where(WorkflowVersion.workflow_id == wf["id"])
                )
            ).scalar_one()
            graph = dict(version.graph)
            graph["steps"] = [
                {**s, "type_version": pinned} if s["id"] == "hook" else s for s in graph["steps"]
            ]
            version.graph = graph
        clear_endpoint_cache()
        r = await client.post(wf["webhook_path"], json={"price": "not a number"})
        assert r.status_code == 500, r.text
        assert "error" not in r.json() and r.json()["detail"] == "the run failed", pinned
