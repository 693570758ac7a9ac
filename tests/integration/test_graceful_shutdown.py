"""Graceful shutdown of real ``railyard worker`` processes (SIGTERM in the middle of a step).

The workers run with a 60 s lease and no scheduler (so no sweeper): a step that was not
finished or handed back at shutdown would stay stuck for longer than any wait here, so a
run that succeeds shows the shutdown itself lost nothing.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from arq.constants import default_queue_name

from backend.runtime import Runtime
from backend.settings import Settings
from backend.workers.worker import HAND_BACK_SECONDS
from tests.diagrams import edge, node
from tests.http_sink import HttpSink, Recorded
from tests.integration.conftest import wait_for_run
from tests.integration.flows import attempt_rows, event_kinds, publish, step_attempts
from tests.integration.railyard_processes import http_flow, processes, until

pytestmark = [pytest.mark.integration, pytest.mark.faults]

LEASE = "60"  # longer than every wait below: only a hand-back can free a step in time
EXIT_MARGIN = 8.0  # seconds for closing the runtime on a loaded machine


async def exit_code(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The process's exit code; fails the test if it runs longer than ``timeout`` s."""
    try:
        return await asyncio.to_thread(proc.wait, timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the worker did not exit within {timeout:g} s") from None


async def start_call(
    client: httpx.AsyncClient, wf: dict[str, Any], sink: HttpSink, order: int
) -> str:
    """Start a run through the webhook; returns its id once the worker calls the sink."""
    r = await client.post(wf["webhook_path"], json={"order": order})
    assert r.status_code == 202, r.text
    calls = len(sink.requests)

    async def calling() -> bool:
        return len(sink.requests) > calls

    await until(calling, 30, "the worker to call the endpoint")
    return str(r.json()["run_id"])


async def test_sigterm_worker_finishes_a_step_shorter_than_the_grace(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    sink: HttpSink,
    embedded_tmp_dir: Path,
) -> None:
    sink.delay = 2.0
    d = http_flow(sink.url)  # hook -> call -> next -> after
    d["nodes"].insert(2, node("next", "http.request", method="GET", url=sink.url))
    d["edges"] = [edge("hook", "call"), edge("call", "next"), edge("next", "after")]
    wf = await publish(client, d)
    with processes(
        settings, embedded_tmp_dir, RAILYARD_SHUTDOWN_GRACE="20", RAILYARD_LEASE_SECONDS=LEASE
    ) as start:
        first = start("worker", "worker-1")
        run_id = await start_call(client, wf, sink, 1)
        first.send_signal(signal.SIGTERM)  # in the middle of the 2 s call
        assert await exit_code(first, 20 + HAND_BACK_SECONDS + EXIT_MARGIN) == 0
        # the running step was finished; the next one was left for another worker
        host = socket.gethostname()
        assert await step_attempts(runtime, run_id, "call") == [
            (1, "succeeded", None, f"{host}:{first.pid}")
        ]
        assert await step_attempts(runtime, run_id, "next") == []
        second = start("worker", "worker-2")
        assert await wait_for_run(runtime, run_id, timeout=40) == "succeeded"
    assert await step_attempts(runtime, run_id, "next") == [
        (1, "succeeded", None, f"{host}:{second.pid}")
    ]
    assert len(sink.requests) == 2
    assert (await event_kinds(runtime, run_id, "call")).count("step.succeeded") == 1


async def test_sigterm_worker_hands_back_a_step_longer_than_the_grace(
    client: httpx.AsyncClient,
    runtime: Runtime,
    settings: Settings,
    sink: HttpSink,
    embedded_tmp_dir: Path,
) -> None:
    grace = 1.0

    def first_call_slow(_: Recorded, number: int) -> tuple[int, Any]:
        sink.delay = 8.0 if number == 1 else 0.0  # the first call outlasts the grace
        return 200, {"ok": True}

    sink.handler = first_call_slow
    wf = await publish(client, http_flow(sink.url))
    with processes(
        settings, embedded_tmp_dir, RAILYARD_SHUTDOWN_GRACE=str(grace), RAILYARD_LEASE_SECONDS=LEASE
    ) as start:
        first = start("worker", "worker-1")
        run_id = await start_call(client, wf, sink, 2)
        second = start("worker", "worker-2")
        first.send_signal(signal.SIGTERM)
        assert await exit_code(first, grace + HAND_BACK_SECONDS + EXIT_MARGIN) == 0
        assert await wait_for_run(runtime, run_id, timeout=40) == "succeeded"
    host = socket.gethostname()
    assert await step_attempts(runtime, run_id, "call") == [
        (1, "released", "worker_shutdown", f"{host}:{first.pid}"),
        (2, "succeeded", None, f"{host}:{second.pid}"),
    ]
    kinds = await event_kinds(runtime, run_id, "call")
    assert kinds.count("step.handed_back") == 1
    assert kinds.count("step.succeeded") == 1  # exactly one completion of the step
    assert (await event_kinds(runtime, run_id, "after")).count("step.succeeded") == 1
    assert [row[0] for row in await attempt_rows(runtime, run_id)].count("call") == 2
    assert len(sink.requests) == 2  # at least once to the API, with one idempotency key
    assert {r.headers["idempotency-key"] for r in sink.requests} == {f"{run_id}:call"}


async def test_a_draining_worker_queues_a_taken_job_again_and_claims_nothing(
    client: httpx.AsyncClient, runtime: Runtime, sink: HttpSink
) -> None:
    wf = await publish(client, http_flow(sink.url))
    r = await client.post(wf["webhook_path"], json={"order": 3})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    await runtime.redis.delete(default_queue_name)  # the job was taken off the queue ...
    runtime.execution.env.drain.begin()  # ... by a worker that is now stopping
    await runtime.execution.execute_step(uuid.UUID(run_id), "call")
    assert await attempt_rows(runtime, run_id) == []  # not claimed, not called
    assert sink.requests == []
    assert await runtime.redis.zcard(default_queue_name) == 1  # queued for another worker


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_sigterm_api_drains_a_slow_webhook_answer_and_reports_not_ready(
    client: httpx.AsyncClient, settings: Settings, sink: HttpSink, embedded_tmp_dir: Path
) -> None:
    delay = 2.0  # RAILYARD_SHUTDOWN_DELAY: serving on, not ready, before the listener closes
    sink.delay = delay + 4.0  # the call outlasts the delay: the answer comes after the close
    d = http_flow(sink.url)  # the webhook answers with the run's output (the Set step)
    d["nodes"][0] = node("hook", "trigger.webhook", respond="last_step", wait_timeout=25)
    wf = await publish(client, d)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with processes(
        settings,
        embedded_tmp_dir,
        RAILYARD_SHUTDOWN_GRACE="20",
        RAILYARD_SHUTDOWN_DELAY=str(delay),
    ) as start:
        start("worker")
        api = start("api", "api", "--port", str(port))
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:

            async def status(path: str) -> int | None:
                try:
                    return (await http.get(path)).status_code
                except httpx.TransportError:  # not listening (yet, or any more)
                    return None

            async def ready() -> bool:
                return await status("/health/ready") == 200

            await until(ready, 30, "the API to be ready")
            slow = asyncio.create_task(http.post(wf["webhook_path"], json={"order": 4}))
            await until(lambda: _called(sink), 30, "the worker to call the endpoint")
            api.send_signal(signal.SIGTERM)

            async def draining() -> bool:
                try:
                    r = await http.get("/health/ready")
                except httpx.TransportError:  # closed already: the 503 was missed
                    return False
                return r.status_code == 503 and r.json().get("process") == "draining"

            await until(draining, delay + 5, "readiness to answer 503 while draining")

            async def refused() -> bool:
                return await status("/health/live") is None

            await until(refused, delay + 10, "the listener to close")
            assert not slow.done()  # still in flight after the listener closed ...
            answer = await asyncio.wait_for(slow, 30)
        assert (answer.status_code, answer.json()) == (200, {"status": 200})  # ... answered
        assert await exit_code(api, 20 + EXIT_MARGIN) == 0
    assert len(sink.requests) == 1


async def _called(sink: HttpSink) -> bool:
    return len(sink.requests) > 0
