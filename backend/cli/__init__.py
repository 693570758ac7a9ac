"""The ``railyard`` command: dev (embedded default), api, worker, scheduler, events, migrate.

``railyard dev`` starts embedded PostgreSQL and Redis (real servers from pip wheels),
migrates, creates the first admin (printing how to log in), and runs API + worker +
sweeper in one process at http://127.0.0.1:8000. Production runs each part separately,
configured by DATABASE_URL and REDIS_URL (see backend/settings.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import secrets
import signal
import sys
import warnings
from pathlib import Path
from typing import Any

import uvicorn

from backend.cli import connector_new, dev, ops_tools
from backend.cli.admin_tools import cmd_create_user, cmd_rotate_key
from backend.settings import Settings, SettingsError, load_settings

log = logging.getLogger("railyard")


def _setup_logging(command: str | None = None) -> None:
    """Root logging of the process: JSON lines, or plain ones for ``railyard dev`` and the
    one-shot tools (``RAILYARD_LOG_FORMAT`` decides when set; backend/observability/logs.py)."""
    from backend.observability import logs

    default = "json" if command in ("api", "worker", "scheduler", "events") else "plain"
    try:
        logs.configure(
            os.environ.get("RAILYARD_LOG_LEVEL", "INFO"),
            fmt=os.environ.get("RAILYARD_LOG_FORMAT", default).lower(),
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc
    # httpx logs every request at INFO, URL and query string included (a connector's
    # API key can sit there): the engine records each step's outcome instead
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # authlib warns at import that its httpx integration will move; nothing to act on here
    # (its module installs an "always" filter on import: ours goes in front of it)
    import authlib.deprecate  # noqa: F401

    warnings.filterwarnings("ignore", message="The httpx module is deprecated", module="authlib")


async def ensure_admin(settings: Settings, data_dir: Path | None) -> tuple[str, str] | None:
    """Create the first admin when no account exists; returns (email, password) if created.

    The password comes from RAILYARD_ADMIN_PASSWORD, else it is generated and written to
    ``<data_dir>/admin-password.txt`` (mode 0600) so a second start can print it again.
    """
    from backend.db.engine import make_engine, make_sessionmaker
    from backend.services.identity import accounts
    from backend.services.identity.passwords import WeakPassword

    engine = make_engine(settings.database_url, pool_size=1)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            if await accounts.count_users(session) > 0:
                return None
            email = os.environ.get("RAILYARD_ADMIN_EMAIL", "admin@example.com")
            password = os.environ.get("RAILYARD_ADMIN_PASSWORD") or secrets.token_urlsafe(16)
            try:
                await accounts.create_user(session, email, password, role="admin", name="Admin")
            except (WeakPassword, accounts.AccountError) as exc:
                raise SettingsError(f"cannot create the first admin {email}: {exc}") from exc
    finally:
        await engine.dispose()
    if data_dir is not None:
        path = data_dir / "admin-password.txt"
        path.write_text(f"{email}\n{password}\n")
        path.chmod(0o600)
    return email, password


async def serve(
    settings: Settings,
    host: str,
    port: int,
    *,
    with_worker: bool,
    banner: str | None = None,
) -> None:
    """Run the API (and, for dev, a worker with its sweeper) until SIGINT/SIGTERM.

    The signals are taken over first, so a Ctrl-C while the app is still being built
    stops it as cleanly as a later one. ``banner`` is printed once the server accepts
    connections (not before: a user who follows it at once must not be refused).

    On a signal the API drains: ``/health/ready`` answers 503 at once, the listener stays
    open ``settings.shutdown_delay`` seconds more (load balancers see the 503 and stop
    sending), then closes; in-flight requests get ``settings.shutdown_grace`` seconds to
    finish (uvicorn's graceful shutdown) before they are cancelled, and a webhook still
    waiting for its run's answer then answers 202 (backend/services/triggers/answer_cutoff.py). With
    the in-process worker (dev) it keeps running jobs until the requests are done (within
    the same grace), then stops as a ``railyard worker`` does, handing back what runs.
    """
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    from backend.app import create_app
    from backend.services.triggers import answer_cutoff
    from backend.workers.worker import make_worker, stop_worker

    _tracing(settings)

    app = create_app(settings, tune_gc=True)
    server = uvicorn.Server(uvicorn_config(app, settings, host, port))
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    worker = make_worker(settings, sweep=False) if with_worker else None
    tasks: list[asyncio.Task[Any]] = [asyncio.create_task(server.serve())]
    if banner is not None:
        tasks.append(asyncio.create_task(_announce_when_listening(server, stop, banner)))
    scheduler_runtime = None
    if worker is not None:
        from backend.runtime import build_runtime
        from backend.workers.scheduler import run_scheduler

        tasks.append(asyncio.create_task(worker.async_run()))
        # dev: the leader-elected scheduler (sweeps and schedules) runs in-process too
        scheduler_runtime = await build_runtime(settings, pool_size=3, name="scheduler")
        tasks.append(asyncio.create_task(run_scheduler(scheduler_runtime, stop)))
        # dev: broker and email subscriptions of connector triggers run in-process too
        from backend.workers.events import run_events

        tasks.append(asyncio.create_task(run_events(scheduler_runtime, stop)))
    waiter: asyncio.Task[Any] = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait([*tasks, waiter], return_when=asyncio.FIRST_COMPLETED)
    await _drain(app, server, stop, settings.shutdown_delay)
    grace_ends = answer_cutoff.cut_waits_after(app.state, settings.shutdown_grace)
    if worker is not None:
        # dev: the worker runs on while in-flight requests (webhooks waiting for their
        # run's answer) finish, within the same grace; then it hands back what still runs
        await asyncio.wait([tasks[0]], timeout=max(0.0, grace_ends - loop.time()))
        await stop_worker(worker, grace_seconds=max(0.0, grace_ends - loop.time()))
    # Let uvicorn finish its shutdown (in-flight requests, lifespan) before cancelling.
    await asyncio.wait(tasks, timeout=settings.shutdown_grace + 10)
    for task in tasks:
        if not task.done():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if scheduler_runtime is not None:
        await scheduler_runtime.close()
    _end_tracing()
    for task in done:
        if task is not waiter and task.exception():
            raise task.exception()  # type: ignore[misc]


def uvicorn_config(app: Any, settings: Settings, host: str, port: int) -> uvicorn.Config:
    """The API's uvicorn configuration (``railyard api`` and ``railyard dev``).

    Forwarded headers (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed only from
    the addresses in ``settings.trusted_proxies`` (``RAILYARD_TRUSTED_PROXIES``); with none,
    uvicorn's proxy-headers middleware is off and the connecting address is the client's
    (uvicorn's own default would trust them from loopback, and read
    ``FORWARDED_ALLOW_IPS`` from the environment).
    """
    from backend.cli.http_protocol import GatheringHttpToolsProtocol

    trusted = list(settings.trusted_proxies)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="info" if logging.getLogger().isEnabledFor(logging.INFO) else "warning",
        lifespan="on",
        http=GatheringHttpToolsProtocol,  # one write per answer (http_protocol.py)
        access_log=os.environ.get("RAILYARD_ACCESS_LOG", "1") != "0",
        log_config=None,  # uvicorn's records go through the root handler (JSON or plain)
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted or [],
    )


async def _drain(app: Any, server: uvicorn.Server, stop: asyncio.Event, delay: float) -> None:
    """Start the API's shutdown: readiness answers 503 from now on; after ``delay``
    seconds of serving on (only when stopped by a signal while up), the listener closes
    and uvicorn lets in-flight requests finish."""
    from backend.api.health import DRAINING

    app.state[DRAINING] = True
    if stop.is_set() and delay > 0 and server.started and not server.should_exit:
        log.info("draining: /health/ready answers 503; closing the listener in %g s", delay)
        await asyncio.sleep(delay)
    server.should_exit = True


async def _announce_when_listening(server: uvicorn.Server, stop: asyncio.Event, text: str) -> None:
    """Print ``text`` once ``server`` listens (or never, when stopped first)."""
    while not server.started:
        if stop.is_set() or server.should_exit:
            return
        await asyncio.sleep(0.05)
    print(text, flush=True)
    await stop.wait()  # keep the task alive: the first task to end stops everything


def cmd_api(args: argparse.Namespace) -> int:
    """Production API process (uvloop when installed; uvicorn uses httptools itself)."""
    from backend.workers.worker import loop_factory

    settings = load_settings()
    settings.require_services()
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(serve(settings, args.host, args.port, with_worker=False))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Production worker process (arq); rides out Redis and PostgreSQL outages."""
    from backend.workers.worker import loop_factory, make_worker, stop_worker

    settings = load_settings()
    settings.require_services()

    async def main() -> None:
        _tracing(settings)
        jobs = {"max_jobs": args.max_jobs} if args.max_jobs else {}
        worker = make_worker(settings, sweep=False, tune_gc=True, **jobs)
        stop = _stop_on_signals()
        probes = await _start_probes(
            args.health_port, lambda: worker.ctx.get("runtime"), settings.metrics_token
        )
        task = asyncio.create_task(worker.async_run())
        try:
            await asyncio.wait(
                [task, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
            )
            await stop_worker(worker, grace_seconds=settings.shutdown_grace)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            if probes is not None:
                await probes.close()
            _end_tracing()
        if not stop.is_set() and task.done() and not task.cancelled() and task.exception():
            raise task.exception()  # type: ignore[misc]

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(main())
    return 0


def _background_process(
    args: argparse.Namespace, name: str, pool_size: int, body: Any, describe: Any = None
) -> int:
    """Run one background process (``scheduler``, ``events``) until SIGTERM or SIGINT:
    tracing, a runtime whose database pool holds ``pool_size`` connections, the probes on
    ``--health-port`` (their readiness body extended by ``describe()`` when given), then
    ``await body(runtime, stop)``; on uvloop, as the API and workers (its polls, starts,
    sweeps and acks are mostly socket reads and writes, bench/triggers.py)."""
    from backend.runtime import build_runtime
    from backend.workers.worker import loop_factory

    settings = load_settings()
    settings.require_services()

    async def main() -> None:
        _tracing(settings)
        runtime = await build_runtime(settings, pool_size=pool_size, name=name)
        stop = _stop_on_signals()
        probes = await _start_probes(
            args.health_port, lambda: runtime, settings.metrics_token, describe
        )
        try:
            await body(runtime, stop)
        finally:
            if probes is not None:
                await probes.close()
            await runtime.close()
            _end_tracing()

    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        runner.run(main())
    return 0


def cmd_scheduler(args: argparse.Namespace) -> int:
    """Production scheduler: durable timers and recovery sweeps, leader-elected; rides out
    Redis and PostgreSQL outages. The leader polls up to CONCURRENT_POLLS (8) subscriptions
    at once beside its sweeps: a pool smaller than that opened and closed overflow
    connections per poll. Its readiness says whether it leads (``"role": "leader"`` or
    ``"standby"``; a standby is ready: it takes over the moment the leader goes)."""
    from backend.workers.scheduler import Leadership, run_scheduler

    leader = Leadership()

    async def body(runtime: Any, stop: asyncio.Event) -> None:
        await run_scheduler(runtime, stop, leader=leader)

    return _background_process(args, "scheduler", SCHEDULER_POOL, body, leader.describe)


def cmd_events(args: argparse.Namespace) -> int:
    """Production events process: broker and email subscriptions of connector triggers
    (scale out by running more; each subscription is held by one at a time). A busy
    subscription writes two groups of events at a time, each with its inbox insert, run
    inserts and link: a pool smaller than that churns connections."""
    from backend.workers.events import run_events

    return _background_process(args, "events", EVENTS_POOL, run_events)


def _tracing(settings: Settings) -> None:
    """Turn tracing on when ``RAILYARD_OTLP_ENDPOINT`` is set (backend/observability/tracing.py)."""
    from backend.observability import tracing

    tracing.configure(endpoint=settings.otlp_endpoint, service_name=settings.otel_service_name)


def _end_tracing() -> None:
    """Export the spans still buffered before the process exits."""
    from backend.observability import tracing

    tracing.shutdown()


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def _start_probes(
    port: int | None, runtime: Any, metrics_token: str = "", describe: Any = None
) -> Any:
    """Serve ``/health/live``, ``/health/ready`` and ``/metrics`` on ``port`` (None: no
    probes); ``describe()`` adds entries to the readiness body that do not decide it.

    ``runtime()`` returns the process's Runtime, or None while it is being built; ready
    means PostgreSQL and Redis both answer (backend/workers/health.py). The probes listen
    on ``RAILYARD_HEALTH_HOST``, loopback by default (the Kubernetes manifests give the
    pod IP); without ``metrics_token`` only this host may read ``/metrics``.
    """
    if port is None:
        return None
    from backend.services.availability import probe_database, probe_redis
    from backend.workers.health import ProbeServer

    async def ready() -> dict[str, str]:
        current = runtime()
        if current is None:
            return {"database": "down: starting", "redis": "down: starting"}
        database, redis = await asyncio.gather(
            probe_database(current.engine), probe_redis(current.redis)
        )
        return {"database": database, "redis": redis}

    server = ProbeServer(
        ready,
        host=os.environ.get("RAILYARD_HEALTH_HOST") or "127.0.0.1",
        port=port,
        metrics_token=metrics_token,
        describe=describe,
    )
    await server.start()
    return server


def cmd_migrate(_: argparse.Namespace) -> int:
    """Apply database migrations."""
    from backend.db.migrate import upgrade

    settings = load_settings()
    settings.require_services(redis=False)
    upgrade(settings.database_url)
    print("database is at the latest migration")
    return 0


SCHEDULER_POOL = 10
"""Database connections the scheduler keeps (plus up to 20 overflow, docs/operations.md)."""

EVENTS_POOL = 10
"""Database connections an events process keeps (plus up to 20 overflow)."""

HEALTH_PORT_HELP = (
    "serve /health/live and /health/ready on this port (default: $RAILYARD_HEALTH_PORT, else off)"
)


def _env_port() -> int | None:
    value = os.environ.get("RAILYARD_HEALTH_PORT", "")
    return int(value) if value.isdigit() else None


def cmd_search_indexer(_: argparse.Namespace) -> int:
    """Follow the outbox into Elasticsearch (docs/search.md)."""
    from backend.search.commands import run_indexer

    settings = load_settings()
    settings.require_services(redis=False)
    asyncio.run(run_indexer(settings))
    return 0


def cmd_search_reindex(_: argparse.Namespace) -> int:
    """Rebuild the Elasticsearch indexes from PostgreSQL."""
    from backend.search.commands import reindex

    settings = load_settings()
    settings.require_services(redis=False)
    counts = asyncio.run(reindex(settings))
    print("re-indexed " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``railyard`` console script."""
    parser = argparse.ArgumentParser(prog="railyard", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    dev.add_command(sub)
    api = sub.add_parser("api", help="run the API server")
    api.add_argument("--host", default="127.0.0.1")
    api.add_argument("--port", type=int, default=8000)
    api.set_defaults(func=cmd_api)
    worker = sub.add_parser("worker", help="run a worker (scale out by running more)")
    worker.add_argument(
        "--max-jobs",
        type=int,
        default=None,
        help="jobs one worker runs at once (default 20)",
    )
    worker.add_argument("--health-port", type=int, default=_env_port(), help=HEALTH_PORT_HELP)
    worker.set_defaults(func=cmd_worker)
    sched = sub.add_parser("scheduler", help="run durable timers and recovery (leader-elected)")
    sched.add_argument("--health-port", type=int, default=_env_port(), help=HEALTH_PORT_HELP)
    sched.set_defaults(func=cmd_scheduler)
    events = sub.add_parser(
        "events", help="run broker and email subscriptions of connector triggers"
    )
    events.add_argument("--health-port", type=int, default=_env_port(), help=HEALTH_PORT_HELP)
    events.set_defaults(func=cmd_events)
    migrate = sub.add_parser("migrate", help="apply database migrations")
    migrate.set_defaults(func=cmd_migrate)
    cu = sub.add_parser(
        "create-user",
        help="create a local account (password asked twice, or read from stdin)",
        description="Create a local account. The password is asked twice at a prompt, or"
        " read from the first line of stdin with --password-stdin; never from the command"
        " line. Uses DATABASE_URL when set, else the `railyard dev` data directory.",
    )
    cu.add_argument("email")
    cu.add_argument("--role", default="editor", choices=["admin", "editor", "operator", "viewer"])
    cu.add_argument("--name", default="", help="display name (default: the email's local part)")
    cu.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin's first line"
    )
    cu.add_argument(
        "--data-dir", default=".railyard", help="the `railyard dev` data directory (.railyard)"
    )
    cu.set_defaults(func=cmd_create_user)
    rot = sub.add_parser(
        "rotate-key", help="re-encrypt credentials and webhook secrets with the current key"
    )
    rot.add_argument("--generate-key", action="store_true", help="print a new random key and exit")
    rot.set_defaults(func=cmd_rotate_key)
    indexer = sub.add_parser(
        "search-indexer", help="follow the outbox into Elasticsearch (search backend)"
    )
    indexer.set_defaults(func=cmd_search_indexer)
    reindex = sub.add_parser(
        "search-reindex", help="rebuild the Elasticsearch indexes from PostgreSQL"
    )
    reindex.set_defaults(func=cmd_search_reindex)
    ops_tools.add_commands(sub)
    connector_new.add_command(sub)
    args = parser.parse_args(argv)
    try:
        _setup_logging(args.command)
        return int(args.func(args))
    except SettingsError as exc:
        print(f"railyard: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
