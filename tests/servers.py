"""Pytest fixtures for the real PostgreSQL and Redis servers used by the test suite.

Import everything into ``tests/conftest.py``: ``from tests.servers import *``.

Each pytest process (each pytest-xdist worker, named by ``PYTEST_XDIST_WORKER``, or
``master``) starts its own servers in a fresh directory
``/tmp/railyard-test-<uid>/<worker>-<pid>-<random>/`` that is removed at the end of the
session. PostgreSQL runs with ``fast=True`` (fsync off), Redis without persistence.
Directories left behind by killed test runs (their pid is gone) are swept, and their
servers stopped, when the next session starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.embedded import EmbeddedPostgres, EmbeddedRedis, pg_bin_dir, pid_alive

__all__ = [
    "TEST_ROOT",
    "embedded_session_dir",
    "embedded_tmp_dir",
    "pg_server",
    "pg_template",
    "pg_url",
    "redis_server",
    "redis_url",
    "sweep_stale_session_dirs",
    "worker_id",
]

TEST_ROOT = Path(tempfile.gettempdir()) / f"railyard-test-{os.getuid()}"
"""Parent of every per-session server directory."""

_SESSION_DIR_RE = re.compile(r"^(?P<worker>[A-Za-z0-9_]+)-(?P<pid>\d+)-")


def worker_id() -> str:
    """pytest-xdist worker name (``gw0``, ``gw1`` ...) or ``master`` without xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "master")


def _kill_from_pid_file(pid_file: Path, sig: signal.Signals) -> None:
    try:
        pid = int(pid_file.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return
    if pid > 0 and pid_alive(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)


def sweep_stale_session_dirs(root: Path = TEST_ROOT) -> None:
    """Stop servers and delete session directories whose pytest process no longer exists."""
    if not root.is_dir():
        return
    for entry in root.iterdir():
        match = _SESSION_DIR_RE.match(entry.name)
        if not entry.is_dir() or match is None or pid_alive(int(match["pid"])):
            continue
        try:
            for pid_file in entry.rglob("postmaster.pid"):
                _kill_from_pid_file(pid_file, signal.SIGQUIT)  # PostgreSQL immediate shutdown
            for pid_file in entry.rglob("redis.pid"):
                _kill_from_pid_file(pid_file, signal.SIGKILL)
        except FileNotFoundError:  # another pytest process is sweeping the same directory
            continue
        shutil.rmtree(entry, ignore_errors=True)


@pytest.fixture(scope="session")
def embedded_session_dir() -> Iterator[Path]:
    """Fresh directory for this pytest process's servers; removed at the end."""
    TEST_ROOT.mkdir(mode=0o755, exist_ok=True)
    sweep_stale_session_dirs()
    path = Path(tempfile.mkdtemp(prefix=f"{worker_id()}-{os.getpid()}-", dir=TEST_ROOT))
    path.chmod(0o755)  # the PostgreSQL system user (when root) must traverse it
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def embedded_tmp_dir(embedded_session_dir: Path, request: pytest.FixtureRequest) -> Path:
    """Fresh empty directory (under the session dir) for a test that starts its own server.

    Unlike ``tmp_path`` it sits under a directory the PostgreSQL system user can traverse.
    """
    name = re.sub(r"[^A-Za-z0-9_]+", "_", request.node.name)[:60]
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=embedded_session_dir))
    path.chmod(0o755)
    return path


def pg_template() -> Path:
    """An initdb'd data directory shared by test sessions (built once per uid and binary).

    Copying it (~0.2 s) is much cheaper than ``initdb`` (~0.7 s idle, seconds on a busy
    2-core machine) for every xdist worker.
    """
    postgres = pg_bin_dir() / "postgres"
    key = hashlib.sha256(f"{postgres}:{postgres.stat().st_mtime_ns}".encode()).hexdigest()[:12]
    template = TEST_ROOT / f"pg-template-{key}"
    done = template / ".railyard-template-complete"
    if done.exists():
        return template
    TEST_ROOT.mkdir(mode=0o755, exist_ok=True)
    with (TEST_ROOT / "pg-template.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # other workers wait for the one building it
        if not done.exists():
            shutil.rmtree(template, ignore_errors=True)
            EmbeddedPostgres(template, fast=True).initialize()
            done.touch()
    return template


def _new_pg_data_dir(path: Path) -> Path:
    shutil.copytree(pg_template(), path, symlinks=True, ignore=shutil.ignore_patterns(".railyard*"))
    return path


@pytest.fixture(scope="session")
def pg_server(embedded_session_dir: Path) -> Iterator[EmbeddedPostgres]:
    """PostgreSQL for this pytest process (one per xdist worker), ``fast=True``.

    ``pg_server.url`` is the SQLAlchemy URL of its ``railyard`` database; use
    ``create_database``/``url_for`` for more databases.
    """
    server = EmbeddedPostgres(_new_pg_data_dir(embedded_session_dir / "pg"), fast=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server(embedded_session_dir: Path) -> Iterator[EmbeddedRedis]:
    """Redis for this pytest process (one per xdist worker), without persistence."""
    server = EmbeddedRedis(embedded_session_dir / "redis", persistence_off=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_url(pg_server: EmbeddedPostgres) -> str:
    """``postgresql+asyncpg://railyard@127.0.0.1:<port>/railyard`` of ``pg_server``."""
    return pg_server.url


@pytest.fixture(scope="session")
def redis_url(redis_server: EmbeddedRedis) -> str:
    """``redis://127.0.0.1:<port>/0`` of ``redis_server``."""
    return redis_server.url
