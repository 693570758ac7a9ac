"""``railyard dev`` as a newcomer runs it: Ctrl-C (SIGINT) while webhooks wait for their
run's answer, and the PostgreSQL and Redis a killed ``railyard dev`` leaves running (taken
over by the next start, or stopped by ``railyard dev --stop``). Real processes throughout."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.embedded import EmbeddedPostgres, pid_alive
from tests.diagrams import edge, node
from tests.http_sink import HttpSink
from tests.integration.dev_process import (
    DEV_EMAIL,
    DEV_PASSWORD,
    DevProcess,
    free_port,
    seed_data_dir,
    server_pids,
    stop_leftovers,
)
from tests.integration.flows import publish
from tests.integration.railyard_processes import http_flow, until

pytestmark = [pytest.mark.integration, pytest.mark.faults]

GRACE = 10.0  # RAILYARD_SHUTDOWN_GRACE of the dev process
EXIT_MARGIN = 20.0  # closing the runtime, the worker and both servers on a loaded machine


async def sign_in(http: httpx.AsyncClient) -> None:
    """Sign in the way docs/security.md shows for scripts: the CSRF cookie from a page,
    then the login with the X-CSRFToken header."""
    await http.get("/login")
    http.headers["X-CSRFToken"] = http.cookies["csrftoken"]
    r = await http.post("/api/auth/login", json={"email": DEV_EMAIL, "password": DEV_PASSWORD})
    assert r.status_code == 200, r.text


def waiting_flow(url: str) -> dict[str, Any]:
    """webhook (answers with the run's output) -> HTTP POST ``url`` -> HTTP GET ``url``
    -> Set: the GET is a job of its own, dispatched when the POST ends."""
    d = http_flow(url)  # hook -> call -> after
    d["nodes"][0] = node("hook", "trigger.webhook", respond="last_step", wait_timeout=120)
    d["nodes"].insert(2, node("next", "http.request", method="GET", url=url))
    d["edges"] = [edge("hook", "call"), edge("call", "next"), edge("next", "after")]
    return d


async def attempts_after_exit(data_dir: Path, run_id: str) -> list[tuple[str, str]]:
    """``(step id, status)`` of the run's attempts, read from the stopped dev's PostgreSQL."""
    pg = EmbeddedPostgres(data_dir / "postgres")
    pg.start()
    assert pg.owned, "railyard dev left its PostgreSQL running"
    try:
        out = await asyncio.to_thread(
            pg.psql,
            f"select step_id, status from attempts where run_id = '{run_id}' order by id",
            "railyard",
        )
    finally:
        pg.stop()
    return [tuple(line.split("|")) for line in out.split()]  # type: ignore[misc]


async def test_dev_sigint_finishes_waiting_webhooks_or_answers_202(
    embedded_tmp_dir: Path, sink: HttpSink
) -> None:
    """SIGINT while two webhooks wait for their runs (response mode ``last_step``): the
    in-process worker keeps running jobs while the API drains, so the run whose two calls
    take 1 s each runs its last step after the signal and its webhook gets 200 with the
    output; the one whose call outlasts the grace gets 202 with the run's links (never a
    500), its attempt is handed back, and dev exits 0 having stopped both servers."""
    sink.delay = 1.0
    slow = HttpSink(delay=GRACE * 10).start()
    data_dir = seed_data_dir(embedded_tmp_dir / "data")
    dev = DevProcess(data_dir, free_port(), {"RAILYARD_SHUTDOWN_GRACE": str(GRACE)}).start()
    try:
        await asyncio.to_thread(dev.wait_ready)
        async with httpx.AsyncClient(base_url=dev.base_url, timeout=60) as http:
            await sign_in(http)
            quick_wf = await publish(http, waiting_flow(sink.url))
            slow_wf = await publish(http, waiting_flow(slow.url))
            quick = asyncio.create_task(http.post(quick_wf["webhook_path"], json={"n": 1}))
            late = asyncio.create_task(http.post(slow_wf["webhook_path"], json={"n": 2}))

            async def both_called() -> bool:
                return bool(sink.requests) and bool(slow.requests)

            await until(both_called, 60, "both runs to call their endpoints")
            dev.signal(signal.SIGINT)
            answer = await asyncio.wait_for(quick, 60)
            assert (answer.status_code, answer.json()) == (200, {"status": 200}), answer.text
            assert len(sink.requests) == 2  # the last step ran after the signal
            fallback = await asyncio.wait_for(late, 60)
        assert fallback.status_code == 202, fallback.text
        links = fallback.json()
        assert links["status"] == "running" and links["run_id"], links
        assert fallback.headers["location"] == links["status_url"]
        assert links["status_url"].endswith(f"/api/v1/runs/{links['run_id']}")
        assert await asyncio.to_thread(dev.wait, GRACE + EXIT_MARGIN) == 0, dev.output()
        assert server_pids(data_dir) == (None, None), dev.output()
        assert "Traceback" not in dev.output(), dev.output()
        assert await attempts_after_exit(data_dir, links["run_id"]) == [
            ("call", "released")  # handed back at the end of the grace, for a later start
        ]
    finally:
        dev.kill()
        slow.stop()
        stop_leftovers(data_dir)


async def test_dev_takes_over_the_servers_a_killed_dev_left_and_stops_them(
    embedded_tmp_dir: Path,
) -> None:
    """A second dev on the same data directory is refused (exit 2, naming the first's
    pid); after a SIGKILL of the first, PostgreSQL and Redis keep running, the next dev
    takes them over (the same processes, said so in its output) and Ctrl-C stops them."""
    data_dir = seed_data_dir(embedded_tmp_dir / "data")
    first = DevProcess(data_dir, free_port()).start()
    try:
        await asyncio.to_thread(first.wait_ready)
        second = DevProcess(data_dir, free_port()).start()
        assert await asyncio.to_thread(second.wait, 60) == 2
        assert f"another railyard dev (pid {first.proc.pid})" in second.output()  # type: ignore[union-attr]
        first.kill()
        left = server_pids(data_dir)
        assert None not in left, first.output()
        again = DevProcess(data_dir, free_port()).start()
        await asyncio.to_thread(again.wait_ready)
        out = again.output()
        assert "took over the PostgreSQL server" in out and "took over the Redis server" in out
        assert server_pids(data_dir) == left  # the same processes serve the new start
        again.signal(signal.SIGINT)
        assert await asyncio.to_thread(again.wait, 60) == 0, again.output()
        assert server_pids(data_dir) == (None, None), again.output()
        assert not any(pid_alive(pid) for pid in left if pid is not None)
    finally:
        first.kill()
        stop_leftovers(data_dir)


async def test_dev_stop_stops_what_a_killed_dev_left_running(embedded_tmp_dir: Path) -> None:
    """``railyard dev --stop`` stops the servers left by a killed dev (and says so), says
    so when nothing runs, and is refused while a dev runs on the directory."""
    data_dir = seed_data_dir(embedded_tmp_dir / "data")
    dev = DevProcess(data_dir, free_port()).start()
    try:
        await asyncio.to_thread(dev.wait_ready)
        refused = DevProcess(data_dir, dev.port).start("--stop")
        assert await asyncio.to_thread(refused.wait, 60) == 2
        assert "another railyard dev" in refused.output()
        assert None not in server_pids(data_dir)
        dev.kill()
        left = server_pids(data_dir)
        assert None not in left
        stopper = DevProcess(data_dir, dev.port).start("--stop")
        assert await asyncio.to_thread(stopper.wait, 90) == 0, stopper.output()
        assert "stopped Redis" in stopper.output() and "PostgreSQL" in stopper.output()
        assert server_pids(data_dir) == (None, None)

        async def gone() -> bool:
            return not any(pid_alive(pid) for pid in left if pid is not None)

        await until(gone, 10, "the servers to exit")
        again = DevProcess(data_dir, dev.port).start("--stop")
        assert await asyncio.to_thread(again.wait, 60) == 0
        assert "nothing runs on" in again.output()
    finally:
        dev.kill()
        stop_leftovers(data_dir)
