"""Ports, processes and log files of the embedded servers, and stopping them at exit.

Servers started by this process are stopped by an ``atexit`` hook (only in the process
that started them, never in a forked child).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
"""Both servers listen on this address only."""


PORT_FILE = "railyard.port"
PG_CONF_FILE = "railyard.conf"
PG_LOG_FILE = "postgres.log"
MAX_UNIX_SOCKET_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
DB_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
BIND_ERRORS = ("could not bind", "address already in use", "could not create any tcp/ip")


class EmbeddedServerError(RuntimeError):
    """An embedded server failed to start, stop or answer; the message carries its log tail."""


def free_port(host: str = HOST) -> int:
    """Return a TCP port on ``host`` that is free right now (chosen by the kernel).

    Another process may still take it before it is used; the servers retry with a new port
    when an automatically chosen port turns out to be taken.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = HOST) -> bool:
    """Return True when nothing listens on ``host:port`` (binding with SO_REUSEADDR works).

    SO_REUSEADDR is used the way PostgreSQL and Redis use it, so ports in TIME_WAIT count as
    free.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def read_port_file(path: Path) -> int | None:
    """The port remembered in ``path`` (a data directory's port file), or None."""
    try:
        port = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def tail(path: Path, lines: int = 40, since: int = 0) -> str:
    """Last ``lines`` lines of ``path`` (from byte offset ``since``), or a note if unreadable."""
    try:
        with path.open("rb") as fh:
            fh.seek(since)
            data = fh.read()
    except OSError as exc:
        return f"(no log: {exc})"
    text = data.decode("utf-8", "replace").rstrip()
    if not text:
        return "(log is empty)"
    return "\n".join(text.splitlines()[-lines:])


def file_size(path: Path) -> int:
    """Size of ``path`` in bytes (0 when it cannot be read)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` runs (even if owned by another user); a zombie (exited,
    not yet reaped by its parent) does not count."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """True when Linux /proc says ``pid`` has exited and waits to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "Z"


def process_name(pid: int) -> str | None:
    """Command name of ``pid`` (Linux /proc), or None when it cannot be read."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def wait_pid_gone(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to exit; True when it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return not pid_alive(pid)


def choose_port(explicit: int | None, remembered: int | None, what: str) -> tuple[int, bool]:
    """Pick a port: (port, auto). An explicit port must be free; a remembered one is preferred."""
    if explicit is not None:
        if not port_is_free(explicit):
            raise EmbeddedServerError(
                f"{what}: port {explicit} on {HOST} is already in use; "
                "pass another port or None to pick a free one"
            )
        return explicit, False
    if remembered is not None and port_is_free(remembered):
        return remembered, True
    return free_port(), True


_started_lock = threading.Lock()
_started: list[Any] = []


def register_started(server: Any) -> None:
    """Remember ``server`` (an EmbeddedPostgres or EmbeddedRedis) to stop at exit."""
    with _started_lock:
        if server not in _started:
            _started.append(server)


def unregister_started(server: Any) -> None:
    """Forget ``server`` (it was stopped)."""
    with _started_lock:
        if server in _started:
            _started.remove(server)


@atexit.register
def _stop_started_servers() -> None:
    with _started_lock:
        servers = list(reversed(_started))
    for server in servers:
        if server._owner_pid != os.getpid():  # inherited through fork: not ours to stop
            continue
        with contextlib.suppress(Exception):
            server.stop()
