"""The end of a run as a waiting webhook sees it: the end notice answers (a small answer
carried in the notice, no read of the run), a big answer is read from PostgreSQL, a lost
end notice still answers at the next poll, a failed run answers 500, and a Respond step's
answer reaches the webhook while the run goes on. Real PostgreSQL, Redis and worker."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.services.runs import run_watch
from backend.services.runs.channels import NOTICE_VALUES_MAX_BYTES, decode_notice
from backend.transport.dispatch import ArqDispatcher
from tests.diagrams import diagram, edge, node
from tests.integration.flows import publish, run_detail

pytestmark = pytest.mark.integration


def _chain(*steps: dict[str, Any], respond: str = "last_step") -> dict[str, Any]:
    """Webhook (answer mode ``respond``) followed by ``steps`` one after another."""
    hook = node("hook", "trigger.webhook", respond=respond, wait_timeout=20)
    ids = ["hook", *(s["id"] for s in steps)]
    return diagram([hook, *steps], [edge(a, b) for a, b in itertools.pairwise(ids)])


def _templates(size: int = 0) -> dict[str, Any]:
    """Three durable Text template steps; the answer to ``{"n": 7}`` is
    ``{"text": "n7-2-3"}`` followed by ``size`` x characters."""
    return _chain(
        node("t1", "data.template", template="n{{ input.body.n }}"),
        node("t2", "data.template", template="{{ input.text }}-2"),
        node("t3", "data.template", template="{{ input.text }}-3" + "x" * size),
    )


class ReadLog:
    """Wraps the waiting webhook's read of the run, recording the status each read saw."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.statuses: list[str] = []
        inner = run_watch._answer_fields

        async def counted(*args: Any, **kwargs: Any) -> Any:
            fields = await inner(*args, **kwargs)
            self.statuses.append(fields[0])
            return fields

        monkeypatch.setattr(run_watch, "_answer_fields", counted)


async def test_end_notice_answers_without_reading_the_run(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small answer comes in the end notice: the webhook, subscribed before the run was
    stored, never read the ended run (at most a one-second poll while it ran)."""
    wf = await publish(client, _templates())
    reads = ReadLog(monkeypatch)
    r = await client.post(wf["webhook_path"], json={"n": 7})
    assert r.status_code == 200 and r.json() == {"text": "n7-2-3"}, r.text
    assert "succeeded" not in reads.statuses


async def test_big_answer_is_read_from_postgresql(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer over the notice's limit is not carried: the webhook reads it from the run."""
    size = NOTICE_VALUES_MAX_BYTES + 100
    wf = await publish(client, _templates(size))
    reads = ReadLog(monkeypatch)
    r = await client.post(wf["webhook_path"], json={"n": 7})
    assert r.status_code == 200 and r.json() == {"text": "n7-2-3" + "x" * size}
    assert reads.statuses[-1] == "succeeded"


async def test_lost_end_notice_still_answers(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every end notice lost, the webhook still answers: its one-second poll reads the
    ended run from PostgreSQL."""
    publish_notice = ArqDispatcher.notify
    lost: list[str] = []

    async def losing(self: ArqDispatcher, run_id: str, notice: bytes = b"changed") -> None:
        said = decode_notice(notice)
        if said is not None and said.status in ("succeeded", "failed"):
            lost.append(run_id)
            return
        await publish_notice(self, run_id, notice)

    monkeypatch.setattr(ArqDispatcher, "notify", losing)
    # the run goes to the worker: its end is heard through Redis only (an eager run's
    # notice reaches the waiting webhook in-process)
    runtime.execution.eager.limit = 0
    wf = await publish(client, _templates())
    reads = ReadLog(monkeypatch)
    r = await client.post(wf["webhook_path"], json={"n": 3})
    assert r.status_code == 200 and r.json() == {"text": "n3-2-3"}, r.text
    assert len(lost) == 1
    assert reads.statuses[-1] == "succeeded"


async def test_failed_run_answers_500(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """A run failing after a durable step answers 500 with its id and status (from the
    notice); the error stays in the run (the caller gets it only when the webhook says
    ``failure_answer: detailed``: tests/security/test_webhook_failure_answer.py)."""
    wf = await publish(
        client,
        _chain(
            node("t1", "data.template", template="n{{ input.body.n }}"),
            node("boom", "control.stop_error", message="no stock"),
        ),
    )
    r = await client.post(wf["webhook_path"], json={"n": 1})
    assert r.status_code == 500, r.text
    body = r.json()
    assert body["status"] == "failed" and "no stock" not in r.text
    run = await run_detail(client, body["run_id"])
    assert run["status"] == "failed" and "no stock" in str(run["error"])


async def test_respond_step_answers_while_the_run_goes_on(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """The Respond step's answer is announced at once: the webhook answers while the run
    still waits on its next step (a 60-second delay)."""
    wf = await publish(
        client,
        _chain(
            node("t1", "data.template", template="n{{ input.body.n }}"),
            node("reply", "control.respond", status=201, body='={"got": text}'),
            node("pause", "control.delay", seconds=60),
            respond="respond_node",
        ),
    )
    r = await client.post(wf["webhook_path"], json={"n": 5})
    assert r.status_code == 201 and r.json() == {"got": "n5"}, r.text
    async with runtime.engine.connect() as conn:
        statuses = (await conn.execute(text("select status from runs"))).scalars().all()
    assert statuses == ["waiting"]
