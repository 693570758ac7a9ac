"""Railyard as a peer: ``railyard api`` (``api_procs``) and ``railyard worker`` (``workers``)
on the harness's stack (bench/cluster.py's :class:`~bench.cluster.Stack`: the PostgreSQL
the other peers share, migrated, and Redis).

Two published workflows answer at their webhooks:

- the 3-step scenario (:func:`three_steps`): Webhook (``respond: last_step``) -> three Text
  template action steps; the answer is 200 with the last step's output, so an answer means
  the run succeeded with every step committed before the next started;
- the same three steps behind a Webhook answering 202 once the run is stored
  (``three_steps(respond=False)``), the fire-and-forget shape; :meth:`Railyard.finished`
  counts its finished runs;
- Webhook -> Set -> If (bench/webhooks.py's ``pipeline``, answered 202 when the run is
  stored) for the comparison with Node-RED; :func:`completed` counts its finished runs.

Durability: PostgreSQL with fsync, synchronous_commit and full_page_writes on; Redis (the
job transport, not the truth) with its append-only file fsynced every second.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import asyncpg

from backend.embedded import free_port
from bench.cluster import Stack
from bench.common import railyard, wait_http
from bench.peers.engines import Processes
from bench.webhooks import pipeline, setup


def three_steps(*, respond: bool = True) -> dict[str, Any]:
    """Webhook -> three Text template action steps; the Webhook answers with the last
    step's output (``respond``) or 202 once the run is stored."""

    def node(nid: str, ntype: str, x: int, **config: Any) -> dict[str, Any]:
        return {"id": nid, "type": ntype, "label": nid, "position": {"x": x, "y": 0}, **config}

    steps = [
        node("s1", "data.template", 200, config={"template": "run{{ input.body.id }} step1"}),
        node("s2", "data.template", 400, config={"template": "{{ input.text }} step2"}),
        node("s3", "data.template", 600, config={"template": "{{ input.text }} step3"}),
    ]
    edges = [
        {"id": f"{a}-{b}", "source": a, "source_port": "out", "target": b, "target_port": "in"}
        for a, b in (("hook", "s1"), ("s1", "s2"), ("s2", "s3"))
    ]
    waits = {"respond": "last_step", "wait_timeout": 60}
    hook = node("hook", "trigger.webhook", 0, config=waits if respond else {})
    return {
        "nodes": [hook, *steps],
        "edges": edges,
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


class Railyard:
    """Railyard's processes, with both workflows published once by :meth:`prepare`."""

    name = "railyard"
    uses_pg = True

    def __init__(self, stack: Stack, *, api_procs: int = 1, workers: int = 2) -> None:
        self.stack = stack
        self.pg = stack.pg
        self.procs = Processes(stack.data / "logs")
        self.api_procs = api_procs
        self.workers = workers
        self.tokens: dict[str, str] = {}
        self.ports: list[int] = []
        self.scenario = "three_steps"
        """Which workflow :meth:`urls` points at: ``three_steps`` or ``set_if``."""

    @property
    def env(self) -> dict[str, str]:
        """The environment Railyard's processes run with (the stack's)."""
        return self.stack.env

    def prepare(self) -> None:
        """Publish both workflows (the stack migrated the database)."""
        self.tokens = {
            "three_steps": asyncio.run(setup(self.env, three_steps())),
            "fire_and_forget": asyncio.run(setup(self.env, three_steps(respond=False))),
            "set_if": asyncio.run(setup(self.env, pipeline())),
        }

    def start(self) -> None:
        """Start the API processes (each on its own port) and the workers."""
        self.ports = []
        for i in range(self.api_procs):
            port = free_port()
            argv = [railyard(), "api", "--host", "127.0.0.1", "--port", str(port)]
            proc = self.procs.spawn(f"railyard-api{i}", argv, self.env)
            wait_http(f"http://127.0.0.1:{port}/health/live", proc)
            self.ports.append(port)
        # every worker ready (connected, polling) before anything is measured: a worker
        # starting up spends about a second of CPU in its first two, which a latency
        # phase run meanwhile pays on a 2-core machine (1 API + 2 workers: 20-24 ms
        # median sequential latency measured at once, 7-8 ms with one worker)
        for i in range(self.workers):
            port = free_port()
            argv = [railyard(), "worker", "--health-port", str(port)]
            proc = self.procs.spawn(f"railyard-worker{i}", argv, self.env)
            wait_http(f"http://127.0.0.1:{port}/health/ready", proc)

    def stop(self) -> None:
        self.procs.stop()

    def pause_workers(self, paused: bool = True) -> None:
        """Freeze (SIGSTOP) or thaw (SIGCONT, ``paused`` false) every worker process: a
        frozen worker spends no CPU and takes no job, its connections and the jobs queued
        meanwhile kept, so the API's intake can be measured alone (bench/peers/
        fire_and_forget.py, :func:`~bench.peers.fire_and_forget.intake`)."""
        for name, pid in self.procs.named():
            if name.startswith("railyard-worker"):
                os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def urls(self) -> list[str]:
        token = self.tokens[self.scenario]
        return [f"http://127.0.0.1:{port}/hooks/{token}" for port in self.ports]

    def pids(self) -> list[int]:
        """Railyard's processes, Redis included: it carries the queue and the notices (its
        job-taking script runs inside it), so its CPU is Railyard's, as Restate's server is
        Restate's. PostgreSQL's is counted apart (``pg_cpu_per_run``)."""
        redis = self.stack.redis.pid if self.stack.redis is not None else None
        return self.procs.pids() + ([redis] if redis is not None else [])

    def roles(self) -> list[tuple[str, int]]:
        """``(role, pid)`` of every process :meth:`pids` counts, the role its kind: ``api``,
        ``worker`` or ``redis`` (several processes may share a role)."""
        roles = [
            (name.removeprefix("railyard-").rstrip("0123456789"), pid)
            for name, pid in self.procs.named()
        ]
        redis = self.stack.redis.pid if self.stack.redis is not None else None
        return roles + ([("redis", redis)] if redis is not None else [])

    def ff_urls(self) -> list[str]:
        """The fire-and-forget workflow's webhook on every API process."""
        token = self.tokens["fire_and_forget"]
        return [f"http://127.0.0.1:{port}/hooks/{token}" for port in self.ports]

    def finished(self) -> tuple[int, float]:
        """Succeeded runs of the fire-and-forget workflow and the latest ``finished_at``."""
        _, ok, last = asyncio.run(self.completed("fire_and_forget"))
        return ok, last

    async def completed(self, scenario: str = "set_if") -> tuple[int, int, float]:
        """Runs of a workflow (``scenario``: ``set_if`` or ``fire_and_forget``):
        ``(stored, succeeded, latest finished_at)``, the last as epoch seconds (0 when none
        finished)."""
        conn = await asyncpg.connect(self.pg.dsn)
        try:
            row = await conn.fetchrow(
                "select count(*), count(*) filter (where r.status = 'succeeded'),"
                " coalesce(extract(epoch from max(r.finished_at)), 0)::float8"
                " from runs r join workflows w on w.id = r.workflow_id"
                " where w.webhook_token = $1",
                self.tokens[scenario],
            )
        finally:
            await conn.close()
        assert row is not None
        return int(row[0]), int(row[1]), float(row[2])
