"""The floor under a webhook delivery on Railyard's stack: what uvicorn and PostgreSQL cost
before any of Railyard's own work, beside Railyard's Webhook -> Set -> If, on one machine.

Three servers, one after another, each driven by the same lean load generator
(bench/webhooks.py's ``load_raw``: ``--connections`` keep-alive connections for
``--seconds``, a distinct small JSON body per request):

- ``bare``: an ASGI app on uvicorn as ``railyard api`` runs it (uvloop, httptools, the
  API's protocol: one write per answer, backend/cli/http_protocol.py) that reads the body
  and answers 202;
- ``durable``: the same, answering 202 after one INSERT of a ``jsonb`` row as large as a
  stored Set -> If run's JSON (2,400 bytes), committed on its own on a connection of an
  asyncpg pool: the least a durable webhook can do;
- ``railyard``: Railyard's API (1 API process + 1 worker) answering Webhook -> Set -> If
  with 202 once the run is stored: its run, three step records and six events.

All three use the same PostgreSQL (bench/cluster.py's ``Stack``: fsync, synchronous_commit
and full_page_writes on). For each, ``figure:`` lines: ``floor.<name>.requests_per_s``,
and per request the CPU of the server process (``server_cpu``), of PostgreSQL
(``pg_cpu``) and of the load generator (``loadgen_cpu``), in milliseconds. The difference
between ``durable`` and ``railyard`` is Railyard's own work per delivery (docs/performance.md,
"Seventh round").

Usage: ``python bench/floor.py [--connections 16] [--seconds 8]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backend.embedded import free_port
from bench.common import (
    figure,
    postmaster_pid,
    process_cpu_seconds,
    tree_cpu_seconds,
    wait_http,
)

ROW_BYTES = 2400
"""Size of the ``durable`` server's row: about a stored Set -> If run's JSON."""

_ANSWER = [(b"content-type", b"application/json"), (b"content-length", b"2")]


async def _read_body(receive: Callable[[], Any]) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def make_app(kind: str, dsn: str | None) -> Callable[..., Any]:
    """The ASGI app of server ``kind`` (``bare`` or ``durable``; ``durable`` inserts into
    table ``floor_rows`` of ``dsn``, created at startup). ``/health/live`` answers 200."""
    import asyncpg

    state: dict[str, Any] = {}
    row = '{"x": "' + "y" * (ROW_BYTES - 10) + '"}'

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    if kind == "durable":
                        pool = state["pool"] = await asyncpg.create_pool(
                            dsn, min_size=16, max_size=16
                        )
                        await pool.execute(
                            "create table if not exists floor_rows (id uuid primary key, "
                            "data jsonb not null)"
                        )
                    await send({"type": "lifespan.startup.complete"})
                else:
                    if "pool" in state:
                        await state["pool"].close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        await _read_body(receive)
        if kind == "durable" and scope["path"] != "/health/live":
            await state["pool"].execute(
                "insert into floor_rows values ($1, $2::jsonb)", uuid.uuid4(), row
            )
        status = 200 if scope["path"] == "/health/live" else 202
        await send({"type": "http.response.start", "status": status, "headers": _ANSWER})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


def serve(kind: str, port: int, dsn: str | None) -> None:
    """Serve ``make_app(kind, dsn)`` on 127.0.0.1:``port`` as ``railyard api`` serves."""
    import uvicorn

    from backend.cli.http_protocol import GatheringHttpToolsProtocol
    from backend.workers.worker import loop_factory

    config = uvicorn.Config(
        make_app(kind, dsn),
        host="127.0.0.1",
        port=port,
        http=GatheringHttpToolsProtocol,
        lifespan="on",
        access_log=False,
        log_level="warning",
    )
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(uvicorn.Server(config).serve())


def measure(name: str, urls: list[str], server_pid: int, pg_pid: int, args: Any) -> None:
    """Drive ``urls`` and print the figures of server ``name`` (module doc)."""
    from bench.peers.scenario import drive

    drive(urls, 2, 10, limit=200)  # warm-up
    server0, pg0 = process_cpu_seconds(server_pid), tree_cpu_seconds(pg_pid)
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    done = drive(urls, args.connections, args.seconds)
    server1, pg1 = process_cpu_seconds(server_pid), tree_cpu_seconds(pg_pid)
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    n = max(len(done["latencies"]), 1)
    loadgen = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    figure(f"floor.{name}.requests_per_s", n / done["elapsed"], "req/s")
    figure(f"floor.{name}.server_cpu", (server1 - server0) / n * 1000, "ms/request")
    figure(f"floor.{name}.pg_cpu", (pg1 - pg0) / n * 1000, "ms/request")
    figure(f"floor.{name}.loadgen_cpu", loadgen / n * 1000, "ms/request")
    figure(f"floor.{name}.errors", done["errors"], "requests")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--serve", choices=("bare", "durable"), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port, os.environ.get("FLOOR_DSN"))
        return 0

    from bench.cluster import Stack
    from bench.peers.railyard_peer import Railyard

    print(f"# load average before: {os.getloadavg()[0]:.2f}", flush=True)
    with Stack("railyard-floor-") as stack:
        pg_pid = postmaster_pid(stack.pg)
        for kind in ("bare", "durable"):
            port = free_port()
            argv = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
            proc = subprocess.Popen(argv, env={**stack.env, "FLOOR_DSN": stack.pg.dsn})
            try:
                wait_http(f"http://127.0.0.1:{port}/health/live", proc)
                measure(kind, [f"http://127.0.0.1:{port}/hooks/x"], proc.pid, pg_pid, args)
            finally:
                proc.terminate()
                proc.wait(timeout=20)
        peer = Railyard(stack, api_procs=1, workers=1)
        peer.prepare()
        peer.start()
        try:
            peer.scenario = "set_if"
            api = dict(peer.procs.named())["railyard-api0"]
            measure("railyard", peer.urls(), api, pg_pid, args)
        finally:
            peer.stop()
    print(f"# load average after: {os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
