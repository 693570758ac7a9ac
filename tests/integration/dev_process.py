"""A real ``railyard dev`` subprocess on a data directory of the test's own, for the tests of
its shutdown and of the servers it leaves or takes over."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.integration.railyard_processes import RAILYARD
from tests.servers import pg_template

DEV_PASSWORD = "amber signal lamp at dusk"
"""The first admin's password (RAILYARD_ADMIN_PASSWORD) of every dev process here."""

DEV_EMAIL = "admin@example.com"
READY_SECONDS = 120.0


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def seed_data_dir(data_dir: Path) -> Path:
    """A data directory whose PostgreSQL is a copy of the suite's initdb'd template (an
    initdb per test would cost seconds)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        pg_template(),
        data_dir / "postgres",
        symlinks=True,
        ignore=shutil.ignore_patterns(".railyard*"),
    )
    return data_dir


@dataclass
class DevProcess:
    """``railyard dev --port <port> --data-dir <data_dir>`` in its own session; its output in
    ``<data_dir>/../dev-<n>.log``."""

    data_dir: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *args: str) -> DevProcess:
        """Start it (``args`` are added to the command line)."""
        n = len(list(self.data_dir.parent.glob("dev-*.log")))
        self.log_path = self.data_dir.parent / f"dev-{n}.log"
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [
                    RAILYARD,
                    "dev",
                    "--port",
                    str(self.port),
                    "--data-dir",
                    str(self.data_dir),
                    *args,
                ],
                env={
                    **os.environ,
                    "RAILYARD_ADMIN_PASSWORD": DEV_PASSWORD,
                    "RAILYARD_ADMIN_EMAIL": DEV_EMAIL,
                    **self.env,
                },
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def output(self) -> str:
        """Everything it printed so far."""
        assert self.log_path is not None
        return self.log_path.read_text(errors="replace")

    def wait_ready(self) -> None:
        """Wait until ``/health/ready`` answers 200 (AssertionError with the output when it
        exits or takes longer than :data:`READY_SECONDS`)."""
        assert self.proc is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"railyard dev exited early:\n{self.output()}")
            try:
                if httpx.get(f"{self.base_url}/health/ready", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"railyard dev was not ready in time:\n{self.output()}")

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """Its exit code (AssertionError with the output after ``timeout`` seconds)."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"railyard dev did not exit:\n{self.output()}") from None

    def kill(self) -> None:
        """SIGKILL it if it still runs (its servers stay up: that is what a kill does)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def server_pids(data_dir: Path) -> tuple[int | None, int | None]:
    """``(postmaster pid, redis-server pid)`` recorded in the data directory, each None
    when its file is missing or its process is gone."""
    from backend.embedded import pid_alive

    def read(path: Path) -> int | None:
        try:
            pid = int(path.read_text().splitlines()[0].strip())
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid_alive(pid) else None

    return read(data_dir / "postgres" / "postmaster.pid"), read(data_dir / "redis" / "redis.pid")


def stop_leftovers(data_dir: Path) -> None:
    """Stop whatever servers still run on ``data_dir`` (test clean-up)."""
    subprocess.run(
        [RAILYARD, "dev", "--stop", "--data-dir", str(data_dir)],
        capture_output=True,
        timeout=120,
        check=False,
    )
