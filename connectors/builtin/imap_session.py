"""An IMAP connection for the email trigger, over aioimaplib: connect to an address the
SSRF policy allowed (implicit TLS, STARTTLS or plain), log in, select a mailbox, search,
fetch, flag, and wait for new mail with IDLE or a NOOP every few seconds.

Every failure is an :class:`~connectors.sdk.ActionError`: ``imap_connect`` (refused,
unreachable, timed out, TLS handshake or certificate, connection lost; retryable),
``imap_auth`` (login refused; not retryable), ``imap_mailbox`` (no such mailbox or it is
read-only; not retryable), ``imap_error`` (the server answered NO or BAD; retryable).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aioimaplib

from connectors import sdk
from connectors.sdk.ssrf import IPAddress

__all__ = ["Mailbox", "Session", "encode_mailbox", "open_session"]

_LOST: list[bytes] = [b"railyard: connection lost"]
"""Put into the IDLE queue when the connection drops, so a wait ends at once."""

_NUMBERS = re.compile(rb"^[0-9 ]+$")


def encode_mailbox(name: str) -> str:
    """``name`` in IMAP's modified UTF-7 (RFC 3501 §5.1.3), quoted for a command line:
    ``"Entwürfe"`` -> ``"\\"Entw&APw-rfe\\""``. Raises :class:`~connectors.sdk.ConfigError`
    for an empty name or one with a control character."""
    if not name or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise sdk.ConfigError(
            f"mailbox: {name!r} is not a mailbox name", details={"field": "mailbox"}
        )
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        if pending:
            raw = "".join(pending).encode("utf-16-be")
            out.append("&" + base64.b64encode(raw).decode().rstrip("=").replace("/", ",") + "-")
            pending.clear()

    for char in name:
        if 0x20 <= ord(char) <= 0x7E:
            flush()
            out.append("&-" if char == "&" else char)
        else:
            pending.append(char)
    flush()
    return aioimaplib.quoted("".join(out))


@dataclass
class Mailbox:
    """What SELECT said: ``uidvalidity``, ``uidnext``, ``exists`` (messages), ``flags``
    (the mailbox's known flags and keywords) and whether new keywords may be stored."""

    uidvalidity: int = 0
    uidnext: int = 0
    exists: int = 0
    flags: set[str] = field(default_factory=set)
    keywords_allowed: bool = False


class _Client(aioimaplib.IMAP4):
    """aioimaplib's client dialling one checked ``address`` (TLS names ``server_name``)
    and noticing a lost connection while it waits in IDLE."""

    def __init__(
        self,
        address: str,
        port: int,
        server_name: str,
        ssl_context: ssl.SSLContext | None,
        timeout: float,
    ) -> None:
        self.server_name = server_name
        self.lost = False
        super().__init__(
            host=address,
            port=port,
            timeout=timeout,
            ssl_context=ssl_context,  # type: ignore[arg-type]
            conn_lost_cb=self._connection_lost,
        )

    def create_client(  # type: ignore[override]
        self,
        host: str,
        port: int,
        loop: asyncio.AbstractEventLoop | None,
        conn_lost_cb: Any = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        running = loop or asyncio.get_running_loop()
        self.protocol = aioimaplib.IMAP4ClientProtocol(running, conn_lost_cb)
        tls: dict[str, Any] = (
            {"ssl": ssl_context, "server_hostname": self.server_name} if ssl_context else {}
        )
        self._client_task = running.create_task(
            running.create_connection(lambda: self.protocol, host, port, **tls)
        )

    def _connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.protocol.idle_queue.put_nowait(_LOST)


def tls_context(verify: bool) -> ssl.SSLContext:
    """A client TLS context (certificate and host name checked unless ``verify`` is off)."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


class Session:
    """A logged-in connection with a selected mailbox (see :func:`open_session`)."""

    def __init__(self, client: _Client, host: str, timeout: float) -> None:
        self.client = client
        self.host = host
        self.timeout = timeout
        self.mailbox = Mailbox()
        self.new_mail = False

    @property
    def has_idle(self) -> bool:
        """Whether the server offers IDLE (RFC 2177) after login."""
        return "IDLE" in self.client.protocol.capabilities

    def _failed(self, what: str, response: Any, kind: str = "imap_error") -> sdk.ActionError:
        text = " ".join(
            line.decode("utf-8", "replace")
            for line in response.lines
            if isinstance(line, bytes | bytearray)
        )
        message = f"IMAP {what} on {self.host} failed: {response.result} {text}".strip()
        if kind == "imap_error":
            return sdk.ActionError(message, kind=kind)
        return sdk.NonRetryableError(message, kind=kind)

    async def _run(self, what: str, call: Any) -> Any:
        """Await ``call`` (an aioimaplib command), mapping transport errors and timeouts.

        An ``EXISTS`` in the answer (mail arrived while the command ran; the server
        reports it once) sets :attr:`new_mail`, so the next wait does not sleep on it."""
        try:
            response = await call
        except (TimeoutError, OSError, aioimaplib.AioImapException) as err:
            raise sdk.ActionError(
                f"IMAP {what} on {self.host}: {type(err).__name__}: {err}".rstrip(": "),
                kind="imap_connect",
            ) from None
        for line in getattr(response, "lines", None) or ():
            if isinstance(line, bytes) and line.endswith(b" EXISTS"):
                self.new_mail = True
        return response

    async def select(self, name: str) -> Mailbox:
        """SELECT ``name`` (read-write); raises ``imap_mailbox`` when the server refuses
        or opens it read-only."""
        response = await self._run("SELECT", self.client.select(encode_mailbox(name)))
        if response.result != "OK":
            raise self._failed(f"SELECT {name!r}", response, kind="imap_mailbox")
        box = Mailbox()
        read_only = False
        for line in response.lines:
            if not isinstance(line, bytes | bytearray):
                continue
            text = bytes(line).decode("utf-8", "replace")
            if found := re.search(r"\[UIDVALIDITY (\d+)\]", text):
                box.uidvalidity = int(found.group(1))
            elif found := re.search(r"\[UIDNEXT (\d+)\]", text):
                box.uidnext = int(found.group(1))
            elif found := re.match(r"(\d+) EXISTS", text):
                box.exists = int(found.group(1))
            elif found := re.search(r"\[PERMANENTFLAGS \(([^)]*)\)\]", text):
                permanent = found.group(1).split()
                box.keywords_allowed = "\\*" in permanent
                box.flags.update(f for f in permanent if f != "\\*")
            elif found := re.match(r"FLAGS \(([^)]*)\)", text):
                box.flags.update(found.group(1).split())
            if "[READ-ONLY]" in text:
                read_only = True
        if read_only:
            raise sdk.NonRetryableError(
                f"mailbox {name!r} on {self.host} is read-only: the trigger must flag "
                "the messages it delivered",
                kind="imap_mailbox",
            )
        self.mailbox = box
        return box

    async def search(self, *criteria: str) -> list[int]:
        """UID SEARCH ``criteria``: the UIDs found, ascending (mail reported before it
        is covered by it; mail reported in its answer may not be: :attr:`new_mail`)."""
        self.new_mail = False
        response = await self._run("SEARCH", self.client.uid_search(*criteria, charset=None))
        if response.result != "OK":
            raise self._failed("SEARCH", response)
        uids: set[int] = set()
        for line in response.lines[:-1]:
            if isinstance(line, bytes | bytearray) and _NUMBERS.match(bytes(line)):
                uids.update(int(n) for n in bytes(line).split())
        return sorted(uids)

    async def fetch(self, uid: int, items: str) -> tuple[bytes, bytes | None]:
        """UID FETCH ``items`` of one message: the FETCH line (its data items as text)
        and the first literal (e.g. ``BODY[]``), or ``(b"", None)`` when the message is
        gone (expunged meanwhile)."""
        response = await self._run("FETCH", self.client.uid("fetch", str(uid), items))
        if response.result != "OK":
            raise self._failed("FETCH", response)
        head, literal = b"", None
        marker = re.compile(rb"FETCH \(.*\bUID %d\b" % uid)
        for index, line in enumerate(response.lines):
            if isinstance(line, bytes) and marker.search(line):
                head = line
                following = response.lines[index + 1] if index + 1 < len(response.lines) else None
                if isinstance(following, bytearray):
                    literal = bytes(following)
                break
        return head, literal

    async def store(self, uid_set: str, flags: Sequence[str]) -> None:
        """UID STORE ``+FLAGS.SILENT`` ``flags`` on ``uid_set`` (e.g. ``"7"``, ``"1:41"``)."""
        response = await self._run(
            "STORE", self.client.uid("store", uid_set, "+FLAGS.SILENT", f"({' '.join(flags)})")
        )
        if response.result != "OK":
            raise self._failed("STORE", response)

    async def wait_for_mail(self, idle: bool, interval: float) -> None:
        """Return when new mail may have arrived: with ``idle``, once the server reports
        ``EXISTS`` in IDLE (or after ``interval`` seconds, to renew IDLE); else after
        ``interval`` seconds and a NOOP. Raises ``imap_connect`` when the connection
        drops meanwhile."""
        if self.client.lost:
            raise sdk.ActionError(f"IMAP connection to {self.host} lost", kind="imap_connect")
        if self.new_mail:
            self.new_mail = False
            return
        queue = self.client.protocol.idle_queue
        while not queue.empty():  # pushes of an earlier IDLE, already acted on
            queue.get_nowait()
        if not idle:
            await asyncio.sleep(interval)
            response = await self._run("NOOP", self.client.noop())
            if response.result != "OK":
                raise self._failed("NOOP", response)
            return
        command = await self._run("IDLE", self.client.idle_start(timeout=interval))
        try:
            while self.client.has_pending_idle():
                pushed = await self._run(
                    "IDLE", self.client.wait_server_push(timeout=interval + self.timeout)
                )
                if pushed is _LOST or self.client.lost:
                    raise sdk.ActionError(
                        f"IMAP connection to {self.host} lost", kind="imap_connect"
                    )
                if pushed == aioimaplib.STOP_WAIT_SERVER_PUSH or any(
                    isinstance(line, bytes) and line.endswith(b"EXISTS") for line in pushed
                ):
                    break
        finally:
            if self.client.has_pending_idle() and not self.client.lost:
                self.client.idle_done()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(command, self.timeout)

    async def close(self) -> None:
        """LOGOUT (best effort, at most a few seconds), then close the connection."""
        if not self.client.lost:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.client.logout(), min(self.timeout, 5.0))
        transport = self.client.protocol.transport
        if transport is not None:
            transport.close()


async def _connect(
    addresses: Sequence[IPAddress],
    host: str,
    port: int,
    security: str,
    verify_tls: bool,
    timeout: float,
) -> _Client:
    """The first of ``addresses`` that answers with a greeting (after implicit TLS)."""
    context = tls_context(verify_tls) if security == "tls" else None
    last: Exception | None = None
    for address in addresses:
        client = _Client(str(address), port, host, context, timeout)
        try:
            await client.wait_hello_from_server()
            return client
        except (TimeoutError, OSError, aioimaplib.AioImapException) as err:
            last = err
            transport = client.protocol.transport
            if transport is not None:
                transport.close()
    raise sdk.ActionError(
        f"cannot connect to IMAP server {host}:{port}: {type(last).__name__}: {last}",
        kind="imap_connect",
        details={"host": host, "port": port},
    )


async def _starttls(client: _Client, host: str, verify_tls: bool, timeout: float) -> None:
    """Upgrade the plain connection (RFC 3501 §6.2.1), then ask for the capabilities again."""
    protocol = client.protocol
    if "STARTTLS" not in protocol.capabilities:
        raise sdk.NonRetryableError(
            f"IMAP server {host} does not offer STARTTLS: choose TLS or no encryption",
            kind="imap_connect",
        )
    command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
    response = await asyncio.wait_for(protocol.execute(command), timeout)
    if response.result != "OK":
        raise sdk.ActionError(f"IMAP STARTTLS on {host} refused", kind="imap_connect")
    loop = asyncio.get_running_loop()
    protocol.transport = await asyncio.wait_for(
        loop.start_tls(protocol.transport, protocol, tls_context(verify_tls), server_hostname=host),
        timeout,
    )
    await asyncio.wait_for(protocol.capability(), timeout)


async def open_session(account: dict[str, Any], mailbox: str, timeout: float) -> Session:
    """Connect with the ``imap`` credential ``account`` (``host``, ``port``,
    ``security``, ``username``, ``password``, ``verify_tls``), log in and SELECT
    ``mailbox``. The host passes the SSRF policy first (``ssrf_blocked`` otherwise)."""
    host, port = str(account["host"]), int(account["port"])
    security = str(account.get("security") or "tls")
    verify_tls = bool(account.get("verify_tls", True))
    addresses = await sdk.current_context().ssrf.resolve_and_check(host, port)
    client = await _connect(addresses, host, port, security, verify_tls, timeout)
    session = Session(client, host, timeout)
    try:
        if security == "starttls":
            await session._run("STARTTLS", _starttls(client, host, verify_tls, timeout))
        username = str(account.get("username") or "")
        response = await session._run(
            "LOGIN",
            client.login(aioimaplib.quoted(username), str(account.get("password") or "")),
        )
        if response.result != "OK":
            raise session._failed(f"login as {username!r}", response, kind="imap_auth")
        if "IDLE" not in client.protocol.capabilities:  # not in the login answer: ask
            await session._run("CAPABILITY", client.protocol.capability())
        await session.select(mailbox)
    except BaseException:
        await session.close()
        raise
    return session
