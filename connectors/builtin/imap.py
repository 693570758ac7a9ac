"""Built-in IMAP connector: the email trigger ``imap.email_received`` ("Email received").

A long-lived subscription (kind ``email``): it logs in to the mailbox of an ``imap``
credential, delivers every message it has not delivered yet, then waits for new mail with
IDLE (RFC 2177) where the server offers it, else with a NOOP every ``check_every``
seconds, and repeats.

**Exactly once.** A message is *delivered* when ``await emit(event)`` returned (its run
is stored); only then does the trigger flag it with its keyword (``$Railyard_<10 hex>``
derived from the workflow and the trigger step, or ``keyword``), plus ``\\Seen`` with
``mark_seen``. What is pending is every message without the keyword, found by UID SEARCH
within the mailbox's UIDVALIDITY. A crash between the run and the flag delivers the
message again and the product keeps it to one run: the event id is the Message-ID header
(``"<uidvalidity>:<uid>"`` when there is none; ``sha256:<hex>`` of an id longer than 200
characters). A server that cannot store keywords (no ``\\*`` in PERMANENTFLAGS) is
tracked with ``\\Seen``: pending is then every unread message.

**Where it starts** (``start``), the first time the keyword meets the mailbox (it is not
yet in the mailbox's FLAGS): ``new`` ("from now") flags the messages already there
without delivering them, ``unread`` flags only the read ones, ``all`` delivers them all.
A mailbox that was empty then has no trace of the start: mail arriving before the first
delivery counts as already there if the subscription restarts in between.

Run input: :mod:`connectors.builtin.imap_message` (headers, text, HTML, attachments with
SHA-256 and base64 content up to ``max_attachment_bytes`` each) plus ``mailbox``, ``uid``,
``uidvalidity``, ``received_at`` (the server's arrival time) and ``size`` (bytes). A
message over ``max_message_bytes`` (or one that cannot be read) goes to the workflow's
dead letters with its headers, and is flagged.

Errors end the subscription (the product starts it again with backoff): see
:mod:`connectors.builtin.imap_session` for their kinds.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Annotated, Literal

import msgspec

from connectors import sdk
from connectors.builtin import polling
from connectors.builtin.imap_message import parse_message, rfc3339
from connectors.builtin.imap_session import Session, encode_mailbox, open_session

__all__ = [
    "IMAP",
    "EmailReceivedConfig",
    "ImapFields",
    "check_names",
    "connector",
    "email_received",
]

_KEYWORD = re.compile(r"^\$?[A-Za-z0-9_.-]{1,60}$")


class ImapFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An IMAP mailbox login.

    ``security``: ``tls`` is implicit TLS (port 993), ``starttls`` upgrades a plain
    connection (port 143), ``none`` sends the password in clear text (local servers
    only). ``verify_tls`` false accepts self-signed certificates.
    """

    host: Annotated[str, msgspec.Meta(title="IMAP host")]
    port: Annotated[int, msgspec.Meta(title="Port", ge=1, le=65535)] = 993
    security: Annotated[
        Literal["tls", "starttls", "none"],
        msgspec.Meta(
            title="Security",
            extra_json_schema={
                "x-enum-labels": {
                    "tls": "TLS (port 993)",
                    "starttls": "STARTTLS (port 143)",
                    "none": "None (clear text)",
                }
            },
        ),
    ] = "tls"
    username: Annotated[str, msgspec.Meta(title="Username")]
    password: Annotated[str, sdk.secret("Password")]
    verify_tls: Annotated[bool, msgspec.Meta(title="Verify the TLS certificate")] = True


IMAP = sdk.credential_type(
    "imap",
    label="IMAP mailbox",
    fields=ImapFields,
    description="Mail server login used to receive email",
)


class EmailReceivedConfig(msgspec.Struct, kw_only=True):
    """Config of ``imap.email_received``."""

    credential: Annotated[str, sdk.credential_meta("imap", title="IMAP mailbox")]
    mailbox: Annotated[
        str, msgspec.Meta(title="Mailbox", description="Folder to watch, e.g. INBOX")
    ] = "INBOX"
    start: Annotated[
        Literal["new", "unread", "all"],
        msgspec.Meta(
            title="Start with",
            description="Which messages already in the mailbox the first start delivers",
            extra_json_schema={
                "x-enum-labels": {
                    "new": "None: only mail arriving from now on",
                    "unread": "The unread messages",
                    "all": "Every message",
                }
            },
        ),
    ] = "new"
    mark_seen: Annotated[
        bool,
        msgspec.Meta(title="Mark as read", description="Set \\Seen on each delivered message"),
    ] = False
    keyword: Annotated[
        str,
        msgspec.Meta(
            title="Delivered keyword",
            description="IMAP keyword flagging delivered messages; empty: one of this "
            "workflow's own ($Railyard_...). Two triggers with one keyword share the work.",
        ),
    ] = ""
    use_idle: Annotated[
        bool,
        msgspec.Meta(
            title="Use IDLE", description="Wait for new mail with IDLE when the server offers it"
        ),
    ] = True
    check_every: Annotated[
        float,
        msgspec.Meta(
            title="Check every (s)",
            description="Without IDLE: seconds between checks. With IDLE: seconds after "
            "which IDLE is renewed.",
            ge=1,
            le=1500,
        ),
    ] = 60.0
    max_message_bytes: Annotated[int, msgspec.Meta(title="Message size limit (bytes)", ge=1024)] = (
        25 * 1024 * 1024
    )
    max_attachment_bytes: Annotated[
        int,
        msgspec.Meta(
            title="Attachment size cap (bytes)",
            description="Larger attachments keep their name, type, size and SHA-256 only",
            ge=0,
        ),
    ] = 10 * 1024 * 1024
    timeout: Annotated[
        float, msgspec.Meta(title="Command timeout (s)", description="Per IMAP command", gt=0)
    ] = 30.0


def check_names(config: EmailReceivedConfig) -> None:
    """The trigger's ``validate`` hook: raises :class:`~connectors.sdk.ConfigError` (field
    ``keyword`` or ``mailbox``) for a keyword that is not an IMAP keyword or a mailbox
    name IMAP cannot carry, so such a config is a compile error."""
    if config.keyword and not _KEYWORD.match(config.keyword):
        raise sdk.ConfigError(
            f"keyword: {config.keyword!r} is not an IMAP keyword (letters, digits, "
            "'_', '.', '-', an optional leading '$', at most 60)",
            details={"field": "keyword"},
        )
    encode_mailbox(config.mailbox)


def _keyword(config: EmailReceivedConfig) -> str:
    check_names(config)
    if config.keyword:
        return config.keyword
    info = sdk.info()
    digest = hashlib.sha256(f"{info.workflow_id}:{info.step_id}".encode()).hexdigest()
    return f"$Railyard_{digest[:10]}"


def _internaldate(head: bytes) -> str | None:
    found = re.search(rb'INTERNALDATE "([^"]+)"', head)
    if found is None:
        return None
    try:
        return rfc3339(datetime.strptime(found.group(1).decode(), "%d-%b-%Y %H:%M:%S %z"))
    except ValueError:
        return None


async def _first_start(session: Session, config: EmailReceivedConfig, keyword: str) -> None:
    """The first time ``keyword`` meets the mailbox: flag what ``start`` leaves out."""
    box = session.mailbox
    if config.start == "all" or keyword in box.flags or not box.keywords_allowed:
        return
    if box.exists == 0 or box.uidnext <= 1:
        return
    existing = f"1:{box.uidnext - 1}"
    if config.start == "new":
        await session.store(existing, [keyword])
    else:
        read = await session.search("UID", existing, "SEEN")
        for chunk in uid_sets(read):
            await session.store(chunk, [keyword])


def uid_sets(uids: list[int], max_chars: int = 1000) -> list[str]:
    """Ascending ``uids`` as IMAP sequence sets (``"1:3,7,9:12"``) of at most about
    ``max_chars`` characters each, so a command line stays short."""
    spans: list[list[int]] = []
    for uid in uids:
        if spans and spans[-1][1] == uid - 1:
            spans[-1][1] = uid
        else:
            spans.append([uid, uid])
    ranges = [str(first) if first == last else f"{first}:{last}" for first, last in spans]
    sets: list[str] = []
    for part in ranges:
        if sets and len(sets[-1]) + len(part) < max_chars:
            sets[-1] += "," + part
        else:
            sets.append(part)
    return sets


async def _deliver(
    session: Session,
    uid: int,
    config: EmailReceivedConfig,
    flags: list[str],
    emit: sdk.Emit,
) -> None:
    """Deliver message ``uid`` (or dead-letter it), then flag it with ``flags``."""
    box = session.mailbox
    head, _ = await session.fetch(uid, "(UID RFC822.SIZE INTERNALDATE)")
    if not head:
        return  # expunged meanwhile
    size_found = re.search(rb"RFC822\.SIZE (\d+)", head)
    size = int(size_found.group(1)) if size_found else 0
    fallback_id = f"{box.uidvalidity}:{uid}"
    meta = {"mailbox": config.mailbox, "uid": str(uid), "uidvalidity": str(box.uidvalidity)}
    if size > config.max_message_bytes:
        _, header = await session.fetch(uid, "(UID BODY.PEEK[HEADER])")
        await emit.dead_letter(
            f"message of {size} bytes is over the limit of {config.max_message_bytes}",
            header or b"",
            meta,
        )
        await session.store(str(uid), flags)
        return
    _, raw = await session.fetch(uid, "(UID BODY.PEEK[])")
    if raw is None:
        return
    try:
        data = parse_message(raw, max_attachment_bytes=config.max_attachment_bytes)
    except Exception as err:  # the parser is lenient; anything left is a broken message
        await emit.dead_letter(f"unreadable message: {type(err).__name__}: {err}", raw, meta)
        await session.store(str(uid), flags)
        return
    message_id = data["headers"]["message_id"]
    event_id = polling.event_id(message_id or fallback_id)
    data.update(
        mailbox=config.mailbox,
        uid=uid,
        uidvalidity=box.uidvalidity,
        received_at=_internaldate(head),
        size=size or len(raw),
    )
    await emit(sdk.TriggerEvent(id=event_id, data=data, meta={**meta, "message_id": message_id}))
    await session.store(str(uid), flags)


@sdk.listen_trigger(
    "imap.email_received",
    label="Email received",
    kind="email",
    validate=check_names,
    config=EmailReceivedConfig,
    category="Email",
    icon="mail",
    output_example={
        "headers": {
            "from": {"name": "Ada", "address": "ada@example.org"},
            "to": [{"name": "", "address": "orders@example.com"}],
            "cc": [],
            "reply_to": [],
            "subject": "Order 1017",
            "date": "2025-01-06T10:00:00Z",
            "message_id": "<1017@example.org>",
            "in_reply_to": "",
            "references": [],
        },
        "text": "Please send 3 boxes.",
        "html": "",
        "attachments": [
            {
                "filename": "order.pdf",
                "content_type": "application/pdf",
                "size": 5120,
                "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "content_id": "",
                "disposition": "attachment",
                "content_base64": "JVBERi0xLjQK...",
                "omitted": False,
            }
        ],
        "mailbox": "INBOX",
        "uid": 42,
        "uidvalidity": 1736157600,
        "received_at": "2025-01-06T10:00:02Z",
        "size": 7340,
    },
)
async def email_received(config: EmailReceivedConfig, emit: sdk.Emit) -> None:
    """Start a run for each email arriving in an IMAP mailbox (IDLE or polling)."""
    keyword = _keyword(config)
    session = await open_session(sdk.credential("credential"), config.mailbox, config.timeout)
    try:
        box = session.mailbox
        if box.keywords_allowed or keyword in box.flags:
            pending, flags = ["UNKEYWORD", keyword], [keyword]
        else:
            sdk.logger().warning(
                "mailbox %r cannot store keywords: delivered messages are marked read",
                config.mailbox,
            )
            pending, flags = ["UNSEEN"], []
        if config.mark_seen or not flags:
            flags = [*flags, "\\Seen"]
        await _first_start(session, config, keyword)
        idle = config.use_idle and session.has_idle
        while True:
            for uid in await session.search(*pending):
                await _deliver(session, uid, config, flags, emit)
            await session.wait_for_mail(idle, config.check_every)
    finally:
        await session.close()


connector = sdk.Connector(
    name="imap",
    label="IMAP",
    version="1.0.0",
    description="Receive email from an IMAP mailbox",
    triggers=[email_received],
    credential_types=[IMAP],
    icon="mail",
)
