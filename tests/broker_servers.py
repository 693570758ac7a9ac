"""Pytest fixtures for the message brokers the broker trigger tests subscribe to.

Import everything into ``tests/conftest.py``: ``from tests.broker_servers import *``.

Each pytest process (each pytest-xdist worker) starts its own RabbitMQ, Mosquitto, NATS
(with JetStream) and a Redis for the Redis Streams tests the first time a test asks for
one, on free ports of 127.0.0.1 only, in a fresh directory
``/tmp/railyard-test-<uid>/brokers/<worker>-<pid>-<random>/`` that is removed, with the
servers stopped, at the end of the session. That Redis is not the session's
``redis_server``: it keeps its append-only file, so it can be restarted without losing
the stream, as a production Redis with AOF would. The Debian packages' system services
are never used: ``make trigger-servers`` installs the binaries. A missing binary fails the
test that needs it, naming that command; nothing is skipped.

Each server keeps its data in its directory, so :meth:`BrokerServer.restart` (stop, then
start on the same port and data) is a broker restart: durable queues, persistent sessions
and JetStream streams survive it, as they do in production.

Servers left running by a killed test session (its pid is gone) are stopped, and their
directories removed, when the next session starts a broker.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.embedded import EmbeddedRedis, pid_alive
from tests.servers import TEST_ROOT, worker_id

__all__ = [
    "BROKER_ROOT",
    "BrokerServer",
    "MosquittoServer",
    "NatsServer",
    "RabbitMQServer",
    "broker_session_dir",
    "mosquitto_server",
    "nats_server",
    "rabbitmq_server",
    "streams_redis_server",
    "sweep_stale_broker_dirs",
]

BROKER_ROOT = TEST_ROOT / "brokers"
"""Parent of every session's broker directory."""

HOST = "127.0.0.1"
INSTALL_HINT = (
    "run `make trigger-servers` (installs rabbitmq-server, mosquitto, nats-server, mariadb-server)"
)
PID_SUFFIX = ".server.pid"
_SESSION_DIR_RE = re.compile(r"^(?P<worker>[A-Za-z0-9_]+)-(?P<pid>\d+)-")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.2):
            return True
    except OSError:
        return False


def _executable(name: str, *extra_dirs: str) -> str:
    """Path of the server binary ``name``; fails the test (with the install hint) when
    it is missing."""
    found = shutil.which(name, path=os.pathsep.join([*extra_dirs, os.environ.get("PATH", "")]))
    if found is None:
        for directory in ("/usr/sbin", "/usr/local/sbin", *extra_dirs):
            candidate = Path(directory) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
        pytest.fail(f"{name} is not installed: {INSTALL_HINT}", pytrace=False)
    return found


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop_pid(pid: int, timeout: float) -> None:
    """SIGTERM ``pid`` (a server started in a session of its own), wait up to ``timeout``
    seconds, then SIGKILL its whole process group: nothing it started outlives it (the
    ``rabbitmq-server`` script runs the Erlang VM as its child)."""
    if pid <= 0 or not pid_alive(pid):
        return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


class BrokerServer:
    """A broker child process on 127.0.0.1 with its data in ``directory``.

    Subclasses build the command line (:meth:`command`), its environment and the files it
    reads (:meth:`prepare`). :meth:`start` waits until the port accepts connections and
    :meth:`ready` says so, at most ``start_timeout`` seconds; it raises ``RuntimeError``
    with the log's tail when the server exits or does not come up.
    """

    name = "broker"
    start_timeout = 30.0
    stop_timeout = 15.0

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.log_path = directory / f"{self.name}.log"
        self._proc: subprocess.Popen[bytes] | None = None

    # -- what subclasses provide ----------------------------------------------------------

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def prepare(self) -> None:
        """Write configuration files (called before every start)."""

    def ready(self) -> bool:
        """True once the server serves clients (after its port accepts connections)."""
        return True

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server and wait until it serves; ``RuntimeError`` when it does not."""
        if self.running:
            return
        self.prepare()
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                env=self.environment(),
                start_new_session=True,
            )
        (self.directory / f"{self.name}{PID_SUFFIX}").write_text(str(self._proc.pid))
        deadline = time.monotonic() + self.start_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {code}; log tail:\n{_tail(self.log_path)}"
                )
            if _port_open(self.port) and self.ready():
                return
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"{self.name} did not serve on {HOST}:{self.port} within "
                    f"{self.start_timeout:.0f} s; log tail:\n{_tail(self.log_path)}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM; SIGKILL after ``stop_timeout`` seconds)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        _stop_pid(proc.pid, self.stop_timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        (self.directory / f"{self.name}{PID_SUFFIX}").unlink(missing_ok=True)

    def restart(self) -> None:
        """Stop, then start on the same port with the same data (a broker restart)."""
        self.stop()
        self.start()


class RabbitMQServer(BrokerServer):
    """RabbitMQ (Debian's ``rabbitmq-server``) with its own node name, epmd and ports.

    ``url`` is ``amqp://guest:guest@127.0.0.1:<port>/`` (RabbitMQ lets ``guest`` in from
    loopback only). The node's Erlang port mapper (epmd) runs as a child of this server
    on a port of its own, so nodes of parallel sessions never meet; the Erlang cookie
    lives in the server's directory (its ``HOME``).
    """

    name = "rabbitmq"
    start_timeout = 60.0
    _BIN = "/usr/lib/rabbitmq/bin"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.dist_port = _free_port()
        self.epmd_port = _free_port()
        self.node = f"railyard-{worker_id()}-{os.getpid()}@localhost"
        self._epmd: subprocess.Popen[bytes] | None = None
        self._server = _executable("rabbitmq-server", self._BIN)
        self._ctl = _executable("rabbitmqctl", self._BIN)
        self._epmd_exe = _executable("epmd", "/usr/lib/erlang/bin")

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{HOST}:{self.port}/"

    def environment(self) -> dict[str, str]:
        base = self.directory
        return {
            **os.environ,
            "HOME": str(base),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": HOST,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": HOST,
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(base / "rabbitmq.erlang.pid"),
        }

    def prepare(self) -> None:
        (self.directory / "rabbitmq.conf").write_text("log.console = false\n")
        (self.directory / "rabbitmq-env.conf").write_text("")
        (self.directory / "enabled_plugins").write_text("[].\n")
        if self._epmd is None or self._epmd.poll() is not None:
            log = (self.directory / "epmd.log").open("ab")
            with log:
                self._epmd = subprocess.Popen(
                    [self._epmd_exe, "-port", str(self.epmd_port), "-address", HOST],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            (self.directory / f"epmd{PID_SUFFIX}").write_text(str(self._epmd.pid))
            deadline = time.monotonic() + 10
            while not _port_open(self.epmd_port):
                if self._epmd.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"epmd did not start: {_tail(self.directory / 'epmd.log')}")
                time.sleep(0.02)

    def command(self) -> list[str]:
        return [self._server]

    def ready(self) -> bool:
        done = subprocess.run(
            [self._ctl, "-n", self.node, "await_startup", "--timeout", "30"],
            env=self.environment(),
            capture_output=True,
            timeout=40,
            check=False,
        )
        return done.returncode == 0

    def stop_epmd(self) -> None:
        epmd, self._epmd = self._epmd, None
        if epmd is not None:
            _stop_pid(epmd.pid, 5)
            with contextlib.suppress(subprocess.TimeoutExpired):
                epmd.wait(5)
            (self.directory / f"epmd{PID_SUFFIX}").unlink(missing_ok=True)


class MosquittoServer(BrokerServer):
    """Mosquitto with anonymous access and persistence in its directory.

    Persistence is written when the broker stops (SIGTERM) and every
    ``autosave_interval`` seconds, so a restart keeps persistent sessions and the QoS 1
    messages queued for them. ``url`` is ``mqtt://127.0.0.1:<port>``.

    ``max_queued`` is ``max_queued_messages``: the QoS 1 messages Mosquitto queues per
    client beyond the 20 in flight (its default, 1000; 0: no limit). Over it Mosquitto
    drops new messages for that client, so a burst larger than that to a subscriber
    slower than its publisher needs a larger queue (mosquitto.conf(5)).
    """

    name = "mosquitto"

    def __init__(self, directory: Path, *, max_queued: int = 1000) -> None:
        super().__init__(directory)
        self.max_queued = max_queued
        self._exe = _executable("mosquitto")

    @property
    def url(self) -> str:
        return f"mqtt://{HOST}:{self.port}"

    def prepare(self) -> None:
        lines = [
            f"listener {self.port} {HOST}",
            "allow_anonymous true",
            "persistence true",
            f"persistence_location {self.directory}/",
            "autosave_interval 1",
            "max_inflight_messages 20",
            f"max_queued_messages {self.max_queued}",
            "log_dest stderr",
            # when run as root, Mosquitto would otherwise switch to the `mosquitto` user
            f"user {getpass.getuser()}",
        ]
        (self.directory / "mosquitto.conf").write_text("\n".join(lines) + "\n")

    def command(self) -> list[str]:
        return [self._exe, "-c", str(self.directory / "mosquitto.conf")]


class NatsServer(BrokerServer):
    """nats-server with JetStream, its store in the server's directory.

    ``url`` is ``nats://127.0.0.1:<port>``; ready once ``/healthz`` of the monitoring
    port answers (JetStream included).
    """

    name = "nats"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.monitor_port = _free_port()
        self._exe = _executable("nats-server")

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    def command(self) -> list[str]:
        return [
            self._exe,
            "-js",
            "-a",
            HOST,
            "-p",
            str(self.port),
            "-m",
            str(self.monitor_port),
            "-sd",
            str(self.directory / "jetstream"),
            "-n",
            f"railyard-{worker_id()}",
        ]

    def ready(self) -> bool:
        try:
            with socket.create_connection((HOST, self.monitor_port), timeout=1) as sock:
                sock.sendall(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                reply = sock.recv(4096)
        except OSError:
            return False
        return reply.startswith(b"HTTP/1.0 200") or reply.startswith(b"HTTP/1.1 200")


def sweep_stale_broker_dirs(root: Path = BROKER_ROOT) -> None:
    """Stop servers and delete broker directories whose pytest process no longer exists."""
    if not root.is_dir():
        return
    for entry in root.iterdir():
        match = _SESSION_DIR_RE.match(entry.name)
        if not entry.is_dir() or match is None or pid_alive(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            for pid_file in [*entry.rglob(f"*{PID_SUFFIX}"), *entry.rglob("redis.pid")]:
                with contextlib.suppress(ValueError, OSError):
                    _stop_pid(int(pid_file.read_text().strip()), 5)
        shutil.rmtree(entry, ignore_errors=True)


@pytest.fixture(scope="session")
def broker_session_dir() -> Iterator[Path]:
    """Fresh directory for this pytest process's brokers; removed at the end."""
    BROKER_ROOT.mkdir(parents=True, exist_ok=True)
    sweep_stale_broker_dirs()
    path = Path(tempfile.mkdtemp(prefix=f"{worker_id()}-{os.getpid()}-", dir=BROKER_ROOT))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _serving(server: BrokerServer) -> Iterator[BrokerServer]:
    try:
        server.start()
        yield server
    finally:
        server.stop()
        if isinstance(server, RabbitMQServer):
            server.stop_epmd()


@pytest.fixture(scope="session")
def rabbitmq_server(broker_session_dir: Path) -> Iterator[BrokerServer]:
    """RabbitMQ for this pytest process (``.url``, ``.restart()``); booting takes a few
    seconds, so its tests share one xdist group."""
    yield from _serving(RabbitMQServer(broker_session_dir / "rabbitmq"))


@pytest.fixture(scope="session")
def mosquitto_server(broker_session_dir: Path) -> Iterator[BrokerServer]:
    """Mosquitto for this pytest process (``.url``, ``.restart()``)."""
    yield from _serving(MosquittoServer(broker_session_dir / "mosquitto"))


@pytest.fixture(scope="session")
def nats_server(broker_session_dir: Path) -> Iterator[BrokerServer]:
    """nats-server with JetStream for this pytest process (``.url``, ``.restart()``)."""
    yield from _serving(NatsServer(broker_session_dir / "nats"))


@pytest.fixture(scope="session")
def streams_redis_server(broker_session_dir: Path) -> Iterator[EmbeddedRedis]:
    """Redis with its append-only file on, for the Redis Streams trigger tests (``.url``;
    ``.stop()`` then ``.start()`` restarts it on the same port with the same data)."""
    server = EmbeddedRedis(broker_session_dir / "redis")
    server.start()
    try:
        yield server
    finally:
        server.stop()
