"""Real Railyard processes and servers of a test's own, for the fault and outage tests:
``railyard worker``/``scheduler`` subprocesses, an app over its own PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from backend.app import create_app
from backend.db.migrate import upgrade
from backend.embedded import EmbeddedPostgres, EmbeddedRedis
from backend.runtime import Runtime, build_runtime
from backend.services.identity import accounts
from backend.services.operations.leadership import SCHEDULER_LOCK_KEY
from backend.settings import Settings, load_settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, login, wait_for_run
from tests.servers import pg_template

RAILYARD = str(Path(sys.executable).with_name("railyard"))
LEASE_SECONDS = 3


@contextmanager
def processes(settings: Settings, log_dir: Path, **extra_env: str) -> Iterator[Any]:
    """Yields ``start(kind, name=None, *args) -> Popen``: runs ``railyard <kind> <args>``
    (worker, scheduler or api) against ``settings``' servers, output in
    ``<log_dir>/<name>.log``; ``extra_env`` adds or overrides environment variables;
    every process started is stopped (SIGTERM, then SIGKILL) on exit."""
    env = {
        **os.environ,
        "DATABASE_URL": settings.database_url,
        "REDIS_URL": settings.redis_url,
        "RAILYARD_LEASE_SECONDS": str(LEASE_SECONDS),
        "RAILYARD_SWEEP_INTERVAL": "0.5",
        "RAILYARD_HTTP_ALLOW_PRIVATE": "true",
        "RAILYARD_BASE_URL": settings.base_url,
        **extra_env,
    }
    running: dict[str, subprocess.Popen[bytes]] = {}
    logs: list[Any] = []

    def start(kind: str, name: str | None = None, *args: str) -> subprocess.Popen[bytes]:
        name = name or kind
        log = (log_dir / f"{name}.log").open("wb")
        logs.append(log)
        proc = subprocess.Popen(
            [RAILYARD, kind, *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        running[name] = proc
        return proc

    try:
        yield start
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in running.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        for log in logs:
            log.close()


def log_tails(log_dir: Path, count: int = 15) -> list[str]:
    """The last ``count`` lines of each process log :func:`processes` wrote in
    ``log_dir``, each log under a ``--- <name>.log`` heading (for failure messages)."""
    lines: list[str] = []
    for log in sorted(log_dir.glob("*.log")):
        lines.append(f"--- the last lines of {log.name}:")
        lines.extend(log.read_text(errors="replace").splitlines()[-count:])
    return lines


def http_flow(url: str) -> dict[str, Any]:
    """webhook -> HTTP POST ``url`` (the slow third-party API) -> Set."""
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node("call", "http.request", method="POST", url=url, body="=body"),
            node("after", "control.set", mapping={"status": "=status"}),
        ],
        [edge("hook", "call"), edge("call", "after")],
    )


async def until(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``await predicate()`` every 50 ms until true; AssertionError naming ``what``
    after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@asynccontextmanager
async def api(settings: Settings) -> AsyncIterator[tuple[Runtime, httpx.AsyncClient]]:
    """A runtime and a logged-in client of the app for ``settings`` (own servers)."""
    rt = await build_runtime(settings, pool_size=3)
    try:
        async with rt.sessionmaker() as session, session.begin():
            await accounts.create_user(session, ADMIN_EMAIL, ADMIN_PASSWORD, role="admin")
        transport = httpx.ASGITransport(app=create_app(settings, rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
            await login(c)
            yield rt, c
    finally:
        await rt.close()


def own_settings(database_url: str, redis_url: str, **overrides: Any) -> Settings:
    """Settings for servers of the test's own (short lease, fast sweep); ``overrides``
    set more."""
    return load_settings(
        environ={},
        database_url=database_url,
        redis_url=redis_url,
        base_url="http://testserver.local",
        http_allow_private=True,
        lease_seconds=float(LEASE_SECONDS),
        sweep_interval=0.5,
        **overrides,
    )


async def own_postgres(directory: Path) -> EmbeddedPostgres:
    """A started, migrated PostgreSQL of the test's own under ``directory / "pg"``."""
    data = directory / "pg"
    shutil.copytree(pg_template(), data, symlinks=True, ignore=shutil.ignore_patterns(".railyard*"))
    pg = EmbeddedPostgres(data, fast=True)
    pg.start()
    await asyncio.to_thread(upgrade, pg.url)
    return pg


@asynccontextmanager
async def own_servers(directory: Path) -> AsyncIterator[tuple[EmbeddedPostgres, Settings]]:
    """A PostgreSQL (:func:`own_postgres`) and a Redis without persistence of the test's
    own under ``directory``, and their :func:`own_settings`; both stopped on exit."""
    pg = await own_postgres(directory)
    redis = EmbeddedRedis(directory / "redis", persistence_off=True)
    redis.start()
    try:
        yield pg, own_settings(pg.url, redis.url)
    finally:
        redis.stop()
        pg.stop()


async def leader_pid(runtime: Runtime) -> int | None:
    """The PostgreSQL backend pid holding the scheduler's leader lock, if any."""
    key = SCHEDULER_LOCK_KEY
    async with runtime.engine.connect() as conn:
        return (
            await conn.execute(
                text(
                    "select pid from pg_locks where locktype = 'advisory' and granted"
                    " and classid = :hi and objid = :lo and objsubid = 1"
                ),
                {"hi": key >> 32, "lo": key & 0xFFFFFFFF},
            )
        ).scalar_one_or_none()


async def has_leader(runtime: Runtime) -> bool:
    """True when a scheduler holds the leader lock."""
    return await leader_pid(runtime) is not None


async def new_leader(runtime: Runtime, old: int | None) -> bool:
    """True when a scheduler other than the one at backend pid ``old`` leads."""
    pid = await leader_pid(runtime)
    return pid is not None and pid != old


async def probe(port: int) -> tuple[int, dict[str, str]]:
    """Status and body of the process's ``/health/ready`` (599 while it does not listen)."""
    try:
        async with httpx.AsyncClient(timeout=5) as c:
            r = await c.get(f"http://127.0.0.1:{port}/health/ready")
    except httpx.TransportError:
        return 599, {}
    return r.status_code, r.json()


async def run_outcomes(rt: Runtime, run_ids: list[str]) -> list[tuple[str, int, int]]:
    """Per run: (status, succeeded attempts of ``call``, succeeded records of ``after``)."""
    async with rt.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select r.status,"
                " (select count(*) from attempts a where a.run_id = r.id and a.step_id = 'call'"
                "  and a.status = 'succeeded'),"
                " (select count(*) from step_runs s where s.run_id = r.id and s.step_id = 'after'"
                "  and s.status = 'succeeded')"
                " from runs r where r.id = any(cast(:ids as uuid[])) order by r.created_at"
            ),
            {"ids": run_ids},
        )
        return [(str(a), int(b), int(c)) for a, b, c in rows]


def every_second() -> dict[str, Any]:
    """A schedule firing every second (cron with seconds): tick -> Set."""
    return diagram(
        [
            node("tick", "trigger.schedule", cron="* * * * * *"),
            node("note", "control.set", mapping={"at": "=scheduled_at"}),
        ],
        [edge("tick", "note")],
    )


async def fires(runtime: Runtime) -> list[tuple[Any, ...]]:
    """``(fire_at, run_id)`` of every fire, in instant order."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(text("select fire_at, run_id from schedule_fires order by 1"))
        return [tuple(r) for r in rows]


async def until_probe(
    port: int, status: int, down: str | None = None, logs: Path | None = None
) -> None:
    """Wait until the probe answers ``status`` (naming ``down`` as down when given); the
    AssertionError after 30 s names the last answer (599: nothing answered in 5 s) and,
    with ``logs`` (the directory given to :func:`processes`), the processes' last lines."""
    last: list[Any] = [None, {}]

    async def check() -> bool:
        got, body = await probe(port)
        last[:] = [got, body]
        return got == status and (down is None or body.get(down, "").startswith("down"))

    try:
        await until(check, 30, f"/health/ready to answer {status}")
    except AssertionError as exc:
        tails = "\n".join(log_tails(logs)) if logs is not None else ""
        raise AssertionError(f"{exc}; its last answer: {last[0]} {last[1]}\n{tails}") from None


def kill_redis(redis: EmbeddedRedis) -> None:
    """SIGKILL the server (no shutdown, connections reset)."""
    assert redis.pid is not None
    os.kill(redis.pid, signal.SIGKILL)
    redis.stop()


async def start_runs(client: httpx.AsyncClient, path: str, first: int, count: int) -> list[str]:
    ids = []
    for n in range(first, first + count):
        r = await client.post(path, json={"order": n})
        assert r.status_code == 202, r.text
        ids.append(r.json()["run_id"])
    return ids


async def all_succeed(rt: Runtime, run_ids: list[str], timeout: float) -> None:
    for run_id in run_ids:
        assert await wait_for_run(rt, run_id, timeout=timeout) == "succeeded", run_id
    assert await run_outcomes(rt, run_ids) == [("succeeded", 1, 1)] * len(run_ids)
