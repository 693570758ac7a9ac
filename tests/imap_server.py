"""Pytest fixtures starting a real IMAP server (Debian's ``dovecot-imapd``) per test process.

Import everything into ``tests/conftest.py``: ``from tests.imap_server import *``.

Each pytest process (each pytest-xdist worker) runs its own ``dovecot -F`` with a config
generated in a temporary directory (not the system service): plain IMAP and implicit TLS
(a self-signed certificate made here) on free ports of 127.0.0.1, STARTTLS on the plain
port, any user name logging in with one password (a static passdb), the Maildirs, base
and state directories in the same temporary directory. ``dovecot`` is started with the
parent-death signal set, so a killed pytest does not leave it running. Run as root, the
login processes use Dovecot's own unprivileged users and the mailboxes belong to
``nobody`` (Dovecot refuses mail access as root); as any other user everything runs as
that user.

Mail is delivered with IMAP APPEND (:meth:`Dovecot.deliver`), as a mail server would
store it. A missing ``dovecot`` binary fails with the command that installs it.
"""

from __future__ import annotations

import contextlib
import ctypes
import imaplib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.fakes.smtp import free_port, self_signed_files

__all__ = [
    "Dovecot",
    "MailUser",
    "dovecot_binary",
    "imap_server",
    "imap_server_without_idle",
    "own_imap_server",
]

PASSWORD = "correct-horse-battery"  # no space: the static passdb splits its args on them


def dovecot_binary() -> str:
    """Path of ``dovecot``; fails the test with how to install it when it is missing."""
    found = shutil.which("dovecot") or (
        "/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None
    )
    if found is None:
        pytest.fail(
            "the IMAP trigger tests need Dovecot: run `make trigger-servers` "
            "(installs Debian's dovecot-imapd)"
        )
    return found


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """PR_SET_PDEATHSIG: SIGTERM when the pytest process that started us dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class MailUser:
    """A mailbox user of a :class:`Dovecot` and the ``imap`` credential that logs in as it."""

    def __init__(self, server: Dovecot, name: str) -> None:
        self.server = server
        self.name = name

    def credential(self, security: str = "none", **extra: object) -> dict[str, object]:
        """Fields of an ``imap`` credential for this user (plain IMAP unless told)."""
        port = self.server.tls_port if security == "tls" else self.server.port
        return {
            "type": "imap",
            "host": "127.0.0.1",
            "port": port,
            "security": security,
            "username": self.name,
            "password": PASSWORD,
            "verify_tls": False,
            **extra,
        }

    def client(self) -> imaplib.IMAP4:
        """A logged-in stdlib client (for the test's own checks and deliveries)."""
        client = imaplib.IMAP4("127.0.0.1", self.server.port, timeout=10)
        client.login(self.name, PASSWORD)
        return client

    def deliver(self, raw: bytes, mailbox: str = "INBOX", flags: str = "") -> int:
        """APPEND ``raw`` to ``mailbox`` (with ``flags``, e.g. ``"\\\\Seen"``); its UID."""
        client = self.client()
        try:
            status, data = client.append(mailbox, f"({flags})" if flags else None, None, raw)
            assert status == "OK", data
            text = data[0].decode() if data and isinstance(data[0], bytes) else ""
            # "[APPENDUID <uidvalidity> <uid>] Append completed."
            return int(text.split("APPENDUID", 1)[1].split("]", 1)[0].split()[1])
        finally:
            client.logout()

    def flags(self, mailbox: str = "INBOX") -> dict[int, set[str]]:
        """``{uid: flags}`` of every message of ``mailbox``."""
        client = self.client()
        try:
            client.select(mailbox)
            status, data = client.uid("FETCH", "1:*", "(UID FLAGS)")
            assert status == "OK", data
            out: dict[int, set[str]] = {}
            for line in data:
                if not isinstance(line, bytes):
                    continue
                text = line.decode()
                uid = int(text.split("UID ", 1)[1].split()[0].rstrip(")"))
                flags = text.split("FLAGS (", 1)[1].split(")", 1)[0]
                out[uid] = set(flags.split())
            return out
        finally:
            client.logout()


class Dovecot:
    """One ``dovecot -F`` on 127.0.0.1 (see the module doc). ``idle`` false removes IDLE
    from the capabilities it announces after login (``imap_capability``)."""

    def __init__(self, root: Path, *, idle: bool = True) -> None:
        self.root = root
        self.idle = idle
        self.port = 0
        self.tls_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.mail = root / "mail"
        self.log = root / "dovecot.log"
        self._ids: tuple[int, int] = (os.getuid(), os.getgid())

    def _users(self) -> tuple[str, str]:
        """(login user, internal user) the processes run as."""
        if os.getuid() != 0:
            me = pwd.getpwuid(os.getuid()).pw_name
            return me, me
        return "dovenull", "dovecot"

    def _config(self, cert: Path, key: Path) -> str:
        login_user, internal_user = self._users()
        uid, gid = self._ids
        capability = (
            ""
            if self.idle
            else "protocol imap {\n  imap_capability = IMAP4rev1 LITERAL+ UIDPLUS ENABLE\n}\n"
        )
        return f"""# generated by tests/imap_server.py
protocols = imap
listen = 127.0.0.1
base_dir = {self.root}/run
state_dir = {self.root}/state
instance_name = railyard-test-{self.root.name}
log_path = {self.log}
ssl = yes
ssl_cert = <{cert}
ssl_key = <{key}
disable_plaintext_auth = no
auth_failure_delay = 0
auth_mechanisms = plain login
default_internal_user = {internal_user}
default_internal_group = {internal_user}
default_login_user = {login_user}
first_valid_uid = 1
mail_location = maildir:~/Maildir
passdb {{
  driver = static
  args = password={PASSWORD}
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={self.mail}/%u
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port}
    ssl = yes
  }}
}}
# no penalty after a refused login (the tests refuse some on purpose)
service anvil {{
  unix_listener anvil-auth-penalty {{
    mode = 0
  }}
}}
{capability}"""

    def add_user(self, name: str | None = None) -> MailUser:
        """A new user with an empty mailbox (any name logs in with :data:`PASSWORD`)."""
        return MailUser(self, name or f"u{uuid.uuid4().hex[:12]}")

    def start(self) -> Dovecot:
        """Start and wait until the plain port answers; fails with the log's tail."""
        dovecot_binary()
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.mail.mkdir(exist_ok=True)
        if os.getuid() == 0:
            nobody = pwd.getpwnam("nobody")
            self._ids = (nobody.pw_uid, nobody.pw_gid)
            os.chown(self.mail, *self._ids)
        cert, key = self_signed_files(self.root)
        for _attempt in range(3):  # a port taken between choosing and binding: again
            self.port, self.tls_port = free_port(), free_port()
            (self.root / "dovecot.conf").write_text(self._config(cert, key))
            if self._launch():
                return self
            self.stop()
        self._failed()

    def restart(self) -> None:
        """Start again after :meth:`stop`, on the same ports with the same mailboxes."""
        if not self._launch():
            self._failed()

    def _launch(self) -> bool:
        self.process = subprocess.Popen(
            [dovecot_binary(), "-F", "-c", str(self.root / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=(self.root / "stderr.log").open("wb"),
            preexec_fn=_die_with_parent,
        )
        return self._wait_ready()

    def _failed(self) -> NoReturn:
        tail = self.log.read_text()[-2000:] if self.log.exists() else ""
        errors = (self.root / "stderr.log").read_text()[-2000:]
        raise RuntimeError(f"dovecot did not start:\n{tail}\n{errors}")

    def _wait_ready(self, seconds: float = 10.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                return False
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock,
            ):
                if sock.recv(100).startswith(b"* OK"):
                    return True
            time.sleep(0.05)
        return False

    def stop(self) -> None:
        """Stop dovecot (and its child processes)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _server(idle: bool) -> Iterator[Dovecot]:
    root = Path(tempfile.mkdtemp(prefix=f"railyard-dovecot-{os.getpid()}-"))
    server = Dovecot(root, idle=idle)
    try:
        server.start()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def imap_server() -> Iterator[Dovecot]:
    """Dovecot with IDLE, for this pytest process; ``imap_server.add_user()`` gives each
    test a mailbox of its own."""
    yield from _server(idle=True)


@pytest.fixture(scope="session")
def imap_server_without_idle() -> Iterator[Dovecot]:
    """Dovecot announcing no IDLE after login (clients must poll)."""
    yield from _server(idle=False)


@pytest.fixture
def own_imap_server() -> Iterator[Dovecot]:
    """A Dovecot of the test's own, to stop and start again."""
    yield from _server(idle=True)
