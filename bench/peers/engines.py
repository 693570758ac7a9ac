"""The peers as processes: Restate (server + Python SDK), DBOS Transact, Node-RED.

Each :class:`Peer` starts its processes on 127.0.0.1 (free ports), names the URLs a request
goes to and the process ids whose CPU counts as the engine's, and stops them. Durability:

- Restate: the single-node server's log and state in RocksDB with the write-ahead log
  fsynced (``rocksdb-disable-wal-fsync = false`` for the local loglet and the log server,
  written out in its config file, which is also the server's default).
- DBOS: its system database on the harness's PostgreSQL (fsync, synchronous_commit and
  full_page_writes on: PostgreSQL's defaults).
- Node-RED: none; a flow runs in memory (the non-durable reference of the issue).

Railyard itself is in :mod:`bench.peers.railyard_peer`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Protocol

import asyncpg
import httpx

from backend.embedded import EmbeddedPostgres, free_port
from bench.common import stop_processes, wait_http
from bench.peers.install import npm_bin, venv_bin

APPS = Path(__file__).resolve().parent / "apps"


class Peer(Protocol):
    """One engine under test."""

    name: str
    uses_pg: bool
    """True when its durable state lives in the harness's PostgreSQL (its CPU counts)."""

    def start(self) -> None:
        """Start the processes and wait until they answer."""

    def stop(self) -> None:
        """Stop every process it started."""

    def urls(self) -> list[str]:
        """Where requests go (round robin over several processes)."""

    def pids(self) -> list[int]:
        """The engine's processes (PostgreSQL's are counted apart)."""

    def ff_urls(self) -> list[str]:
        """Where a fire-and-forget start goes: the same 3-step run, answered (200 or 202)
        once the engine has accepted it, without waiting for it to run."""

    def finished(self) -> tuple[int, float]:
        """``(runs finished successfully so far, epoch seconds of the latest finish)``
        as the engine records them (0.0 when none); the fire-and-forget shape counts the
        difference over a phase."""


class Processes:
    """Subprocesses with their output in ``<logs>/<name>.log``, stopped together."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.logs.mkdir(parents=True, exist_ok=True)
        self.running: list[subprocess.Popen[bytes]] = []
        self.names: dict[int, str] = {}

    def spawn(
        self, name: str, argv: list[str], env: dict[str, str], cwd: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` (its output appended to its log file)."""
        out = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        self.running.append(proc)
        self.names[proc.pid] = name
        return proc

    def stop(self) -> None:
        """SIGINT each, then wait up to 15 s (kill after that)."""
        stop_processes(self.running, signal.SIGINT, 15)
        self.running = []
        self.names = {}

    def pids(self) -> list[int]:
        """Process ids of the live processes."""
        return [p.pid for p in self.running if p.poll() is None]

    def named(self) -> list[tuple[str, int]]:
        """``(name, pid)`` of the live processes."""
        return [(self.names[p.pid], p.pid) for p in self.running if p.poll() is None]


RESTATE_CONFIG = """\
node-name = "bench"
cluster-name = "railyard-bench"
disable-telemetry = true
log-filter = "warn"
bind-address = "127.0.0.1:{node}"
advertised-address = "http://127.0.0.1:{node}/"

[admin]
bind-address = "127.0.0.1:{admin}"
disable-web-ui = true

[ingress]
bind-address = "127.0.0.1:{ingress}"

[bifrost.local]
rocksdb-disable-wal-fsync = false

[log-server]
rocksdb-disable-wal-fsync = false
"""


RESTATE_FINISHED = (
    "SELECT count(*) AS n, max(completed_at) AS last FROM sys_invocation"
    " WHERE target_service_name = 'Peers' AND status = 'completed'"
    " AND completion_result = 'success'"
)
"""Successfully completed invocations of the scenario's service and the latest end."""


class Restate:
    """Restate server (npm) plus the Python SDK service ``Peers/run`` under hypercorn."""

    name = "restate"
    uses_pg = False

    def __init__(self, data: Path) -> None:
        self.data = data / "restate"
        self.data.mkdir(parents=True, exist_ok=True)
        self.procs = Processes(data / "logs")
        self.ingress = self.admin = self.node = 0

    def start(self) -> None:
        """Start the server (its data kept across rounds), the SDK process, and register it."""
        if not self.ingress:  # the node's addresses are part of its stored identity
            self.node, self.admin, self.ingress = free_port(), free_port(), free_port()
        config = self.data / "restate.toml"
        config.write_text(
            RESTATE_CONFIG.format(node=self.node, admin=self.admin, ingress=self.ingress)
        )
        env = {**os.environ, "RESTATE_LISTEN_MODE": "tcp"}
        server = self.procs.spawn(
            "restate-server",
            [str(npm_bin("restate-server")), "--config-file", str(config), "--no-logo"],
            env,
            cwd=self.data,
        )
        wait_http(f"http://127.0.0.1:{self.admin}/health", server, timeout=120)
        sdk_port = free_port()
        sdk = self.procs.spawn(
            "restate-sdk",
            [str(venv_bin("hypercorn")), "--bind", f"127.0.0.1:{sdk_port}", "restate_app:app"],
            env,
            cwd=APPS,
        )
        wait_http(f"http://127.0.0.1:{sdk_port}/health", sdk)
        deadline = time.monotonic() + 60
        while True:
            answer = httpx.post(
                f"http://127.0.0.1:{self.admin}/deployments",
                json={"uri": f"http://127.0.0.1:{sdk_port}", "force": True},
                timeout=30,
            )
            if answer.status_code < 300:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"Restate registration: {answer.status_code} {answer.text}")
            time.sleep(0.5)

    def stop(self) -> None:
        self.procs.stop()

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{self.ingress}/Peers/run"]

    def pids(self) -> list[int]:
        return self.procs.pids()

    def ff_urls(self) -> list[str]:
        """The ingress's ``/send``: 202 with the invocation id once it is in the log."""
        return [f"http://127.0.0.1:{self.ingress}/Peers/run/send"]

    def finished(self) -> tuple[int, float]:
        """From the server's introspection SQL (``sys_invocation``; Restate 1.7 keeps a
        completed invocation with its ``completed_at`` for a day by default)."""
        answer = httpx.post(
            f"http://127.0.0.1:{self.admin}/query",
            json={"query": RESTATE_FINISHED},
            headers={"accept": "application/json"},
            timeout=30,
        )
        answer.raise_for_status()
        row = answer.json()["rows"][0]
        last = row.get("last")
        return int(row["n"]), datetime.fromisoformat(last).timestamp() if last else 0.0


class Dbos:
    """DBOS Transact: ``processes`` uvicorn processes, one workflow ``three_steps`` each,
    sharing the system database ``dbos`` on the harness's PostgreSQL."""

    name = "dbos"
    uses_pg = True

    def __init__(self, data: Path, pg: EmbeddedPostgres, processes: int = 2) -> None:
        self.pg = pg
        self.count = processes
        self.procs = Processes(data / "logs")
        self.ports: list[int] = []

    def start(self) -> None:
        """Start the processes one after the other (the first creates DBOS's tables)."""
        self.pg.create_database("dbos")
        self.ports = []
        for i in range(self.count):
            port = free_port()
            env = {
                **os.environ,
                "DBOS_DATABASE_URL": self.pg.dsn_for("dbos"),
                "DBOS_EXECUTOR": f"bench{i}",
            }
            argv = [str(venv_bin("uvicorn")), "--host", "127.0.0.1", "--port", str(port)]
            argv += ["--no-access-log", "--log-level", "warning", "dbos_app:app"]
            proc = self.procs.spawn(f"dbos{i}", argv, env, cwd=APPS)
            wait_http(f"http://127.0.0.1:{port}/health", proc, timeout=120)
            self.ports.append(port)

    def stop(self) -> None:
        self.procs.stop()

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/run" for port in self.ports]

    def pids(self) -> list[int]:
        return self.procs.pids()

    def ff_urls(self) -> list[str]:
        """``/start``: 202 once DBOS stored the workflow's start (bench/peers/apps/dbos_app.py)."""
        return [f"http://127.0.0.1:{port}/start" for port in self.ports]

    def finished(self) -> tuple[int, float]:
        """From DBOS's ``dbos.workflow_status`` (``updated_at`` in epoch milliseconds)."""

        async def read() -> tuple[int, float]:
            conn = await asyncpg.connect(self.pg.dsn_for("dbos"))
            try:
                row = await conn.fetchrow(
                    "select count(*), coalesce(max(updated_at), 0)"
                    " from dbos.workflow_status where status = 'SUCCESS'"
                )
            finally:
                await conn.close()
            assert row is not None
            return int(row[0]), int(row[1]) / 1000

        return asyncio.run(read())


def node_red_flow() -> list[dict[str, object]]:
    """Webhook -> Set -> If in Node-RED: http in -> change (JSONata) -> switch -> http
    response, the same mapping and condition as bench/webhooks.py's pipeline."""
    mapping = '{"id": payload.id, "total": payload.qty * 2}'
    return [
        {"id": "tab", "type": "tab", "label": "bench"},
        {
            "id": "hook",
            "type": "http in",
            "z": "tab",
            "url": "/hook",
            "method": "post",
            "wires": [["set_1"]],
        },
        {
            "id": "set_1",
            "type": "change",
            "z": "tab",
            "rules": [{"t": "set", "p": "payload", "pt": "msg", "to": mapping, "tot": "jsonata"}],
            "wires": [["if_1"]],
        },
        {
            "id": "if_1",
            "type": "switch",
            "z": "tab",
            "property": "payload.total",
            "propertyType": "msg",
            "rules": [{"t": "gt", "v": "100", "vt": "num"}, {"t": "else"}],
            "checkall": "true",
            "outputs": 2,
            "wires": [["answer"], ["answer"]],
        },
        {"id": "answer", "type": "http response", "z": "tab", "statusCode": "", "wires": []},
        *node_red_fire_and_forget(),
    ]


def node_red_fire_and_forget() -> list[dict[str, object]]:
    """The 3-step run started without waiting, in Node-RED: ``POST /ff`` answers 202 at
    once while the message goes on through three ``change`` nodes (the same text as the
    other engines' steps) to a ``function`` node counting the ends in the flow context;
    ``GET /ff/done`` answers ``{"done": <count>, "last": <epoch ms of the latest end>}``."""
    count = (
        "const done = (flow.get('done') || 0) + 1;\n"
        "flow.set('done', done);\nflow.set('last', Date.now());\nreturn null;"
    )
    report = (
        "msg.payload = {done: flow.get('done') || 0, last: flow.get('last') || 0};\nreturn msg;"
    )

    def step(nid: str, to: str, then: str) -> dict[str, object]:
        rule = {"t": "set", "p": "payload", "pt": "msg", "to": to, "tot": "jsonata"}
        return {"id": nid, "type": "change", "z": "tab", "rules": [rule], "wires": [[then]]}

    accepted = {"t": "set", "p": "statusCode", "pt": "msg", "to": "202", "tot": "num"}
    return [
        {
            "id": "ff_hook",
            "type": "http in",
            "z": "tab",
            "url": "/ff",
            "method": "post",
            "wires": [["ff_accept", "ff_s1"]],
        },
        {
            "id": "ff_accept",
            "type": "change",
            "z": "tab",
            "rules": [accepted],
            "wires": [["ff_answer"]],
        },
        {"id": "ff_answer", "type": "http response", "z": "tab", "statusCode": "", "wires": []},
        step("ff_s1", '"run" & $string(payload.id) & " step1"', "ff_s2"),
        step("ff_s2", 'payload & " step2"', "ff_s3"),
        step("ff_s3", 'payload & " step3"', "ff_count"),
        {
            "id": "ff_count",
            "type": "function",
            "z": "tab",
            "func": count,
            "outputs": 0,
            "wires": [],
        },
        {
            "id": "ff_done",
            "type": "http in",
            "z": "tab",
            "url": "/ff/done",
            "method": "get",
            "wires": [["ff_report"]],
        },
        {
            "id": "ff_report",
            "type": "function",
            "z": "tab",
            "func": report,
            "outputs": 1,
            "wires": [["ff_done_answer"]],
        },
        {
            "id": "ff_done_answer",
            "type": "http response",
            "z": "tab",
            "statusCode": "",
            "wires": [],
        },
    ]


NODE_RED_SETTINGS = """\
module.exports = {{
    uiHost: "127.0.0.1",
    uiPort: {port},
    flowFile: "flows.json",
    credentialSecret: false,
    httpAdminRoot: false,
    logging: {{ console: {{ level: "warn", metrics: false, audit: false }} }},
    diagnostics: {{ enabled: false }},
    telemetry: {{ enabled: false }},
}};
"""


class NodeRed:
    """Node-RED (npm) running :func:`node_red_flow` at ``POST /hook``."""

    name = "node-red"
    uses_pg = False

    def __init__(self, data: Path) -> None:
        self.home = data / "node-red"
        self.home.mkdir(parents=True, exist_ok=True)
        self.procs = Processes(data / "logs")
        self.port = 0

    def start(self) -> None:
        self.port = free_port()
        (self.home / "flows.json").write_text(json.dumps(node_red_flow()))
        settings = self.home / "settings.js"
        settings.write_text(NODE_RED_SETTINGS.format(port=self.port))
        argv = [str(npm_bin("node-red")), "--userDir", str(self.home), "--settings", str(settings)]
        proc = self.procs.spawn("node-red", argv, dict(os.environ))
        wait_http(f"http://127.0.0.1:{self.port}/hook", proc, timeout=120)

    def stop(self) -> None:
        self.procs.stop()

    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{self.port}/hook"]

    def pids(self) -> list[int]:
        # node-red's bin is a node script: the server is that node process itself
        return self.procs.pids()

    def ff_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{self.port}/ff"]

    def finished(self) -> tuple[int, float]:
        """The flow's own count (its context, in memory: nothing is stored)."""
        answer = httpx.get(f"http://127.0.0.1:{self.port}/ff/done", timeout=30)
        answer.raise_for_status()
        done = answer.json()
        return int(done["done"]), float(done["last"]) / 1000
