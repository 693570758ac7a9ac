"""``railyard dev``: everything in one process on the embedded PostgreSQL and Redis of a
data directory, and ``railyard dev --stop`` for the servers a killed one left running.

One ``railyard dev`` at a time owns a data directory: it holds an exclusive lock on
``<data dir>/dev.lock`` (its pid inside) while it runs, and a second one on the same
directory is refused. The lock is the kernel's (``flock``), so it goes away with the
process however it ends. PostgreSQL and Redis that run from the data directory while no
``railyard dev`` holds the lock were left by one that was killed (SIGKILL, a closed
terminal): the next ``railyard dev`` takes them over and stops them when it stops, and
``railyard dev --stop`` stops them without starting anything. A server is only taken over
when it is the data directory's own (PostgreSQL: its ``postmaster.pid`` in the data
directory; Redis: the pid in ``redis.pid`` answering on the remembered port with the
directory's ``redis.conf``), never another one that happens to use the port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from backend.settings import SettingsError, load_settings

LOCK_FILE = "dev.lock"
"""The file of a data directory a running ``railyard dev`` holds locked (its pid inside)."""


def step(text: str) -> None:
    """One line of ``railyard dev``'s progress, on stdout."""
    print(f"railyard: {text}", flush=True)


def quiet_for_dev() -> None:
    """``railyard dev`` prints its own progress lines; library logs show warnings and
    errors only (``RAILYARD_LOG_LEVEL=INFO`` brings them back), and the per-request access
    log is off unless ``RAILYARD_ACCESS_LOG=1``."""
    if "RAILYARD_LOG_LEVEL" not in os.environ:
        logging.getLogger().setLevel(logging.WARNING)
    os.environ.setdefault("RAILYARD_ACCESS_LOG", "0")


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[IO[str]]:
    """Hold ``<data_dir>/dev.lock`` exclusively (non-blocking) for the block, with this
    process's pid written in it. Raises :class:`SettingsError` naming the holder's pid
    when another ``railyard dev`` holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    with path.open("a+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise SettingsError(
                f"another railyard dev (pid {holder}) runs on {data_dir}: stop it first"
                " (Ctrl-C), or pass another --data-dir"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        try:
            yield fh
        finally:
            fh.seek(0)
            fh.truncate()


def cmd_dev_stop(data_dir: Path) -> int:
    """``railyard dev --stop``: stop the PostgreSQL and Redis a killed ``railyard dev`` left
    running on ``data_dir`` (exit 0, also when none runs). Refused (SettingsError, exit 2)
    while a ``railyard dev`` runs there: Ctrl-C stops that one and its servers."""
    from backend.embedded import EmbeddedPostgres, EmbeddedRedis

    if not data_dir.is_dir():
        raise SettingsError(f"no Railyard data directory at {data_dir}")
    with data_dir_lock(data_dir):
        pg, redis = EmbeddedPostgres(data_dir / "postgres"), EmbeddedRedis(data_dir / "redis")
        stopped = []
        for server in (redis, pg):
            if server.take_over():
                server.stop()
                stopped.append(f"{server.kind} (port {server.port})")
    step(f"stopped {' and '.join(stopped)}" if stopped else f"nothing runs on {data_dir}")
    return 0


def cmd_dev(args: argparse.Namespace) -> int:
    """Embedded PostgreSQL + Redis, migrations, first admin, API + worker + scheduler;
    ``--stop`` runs :func:`cmd_dev_stop` instead."""
    data_dir = Path(args.data_dir).resolve()
    if args.stop:
        return cmd_dev_stop(data_dir)
    quiet_for_dev()
    with data_dir_lock(data_dir):
        return _run_dev(args, data_dir)


def _run_dev(args: argparse.Namespace, data_dir: Path) -> int:
    from backend.cli import ensure_admin, serve
    from backend.cli.admin_tools import DEV_BASE_URL_FILE
    from backend.crypto import ensure_dev_key
    from backend.db.migrate import upgrade
    from backend.embedded import EmbeddedPostgres, EmbeddedRedis

    pg = EmbeddedPostgres(data_dir / "postgres")
    redis = EmbeddedRedis(data_dir / "redis")
    step(f"starting PostgreSQL and Redis (data in {data_dir})")
    try:
        for server in (pg, redis):
            if server.take_over():
                step(
                    f"took over the {server.kind} server left running on port {server.port}"
                    " (it stops when this one does)"
                )
        pg.start()  # no-op for a server taken over
        redis.start()
        settings = load_settings(
            database_url=pg.url,
            redis_url=redis.url,
            base_url=os.environ.get("RAILYARD_BASE_URL") or f"http://127.0.0.1:{args.port}",
            http_allow_private=os.environ.get("RAILYARD_HTTP_ALLOW_PRIVATE", "1") == "1",
            encryption_key=os.environ.get("RAILYARD_ENCRYPTION_KEY") or ensure_dev_key(data_dir),
        )
        # where `railyard create-user` tells new accounts to sign in
        (data_dir / DEV_BASE_URL_FILE).write_text(settings.base_url + "\n", encoding="utf-8")
        step("applying database migrations")
        upgrade(settings.database_url)
        created = asyncio.run(ensure_admin(settings, data_dir))
        if created:
            email, password = created
            step(f"created the first admin, {email}")
        else:
            stored = data_dir / "admin-password.txt"
            lines = stored.read_text().split() if stored.exists() else ["(existing)", "(unchanged)"]
            email, password = lines[0], lines[1]
        step("starting the web server, a worker and the scheduler")
        banner = (
            f"\nRailyard is running at http://127.0.0.1:{args.port}\n"
            f"  log in as {email} with password {password}\n"
            f"  data directory: {data_dir}\n  Ctrl-C stops everything.\n"
        )
        asyncio.run(serve(settings, "127.0.0.1", args.port, with_worker=True, banner=banner))
    finally:
        step("stopping PostgreSQL and Redis")
        redis.stop()
        pg.stop()
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``railyard dev`` (``--port``, ``--data-dir``, ``--stop``) to ``sub``."""
    dev = sub.add_parser("dev", help="run everything on embedded PostgreSQL and Redis")
    dev.add_argument("--port", type=int, default=8000)
    dev.add_argument("--data-dir", default=".railyard")
    dev.add_argument(
        "--stop",
        action="store_true",
        help="stop the PostgreSQL and Redis a killed `railyard dev` left running on the data"
        " directory, then exit",
    )
    dev.set_defaults(func=cmd_dev)
