"""``imap.email_received`` against a real Dovecot (tests/imap_server.py): IDLE and polling,
delivery only after ``emit`` returned, MIME parsing, TLS, errors."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from email.message import EmailMessage
from typing import Any

import pytest

from backend.services.connectors.node_reference import builtin_catalog
from backend.services.workflows.diagram_checks import trigger_diagnostics
from connectors import sdk
from connectors.builtin.imap import IMAP, connector, email_received, uid_sets
from connectors.builtin.imap_session import encode_mailbox
from connectors.testing import TriggerTestEnvironment
from designer_schema.diagram import Diagram, Node
from tests.imap_server import Dovecot, MailUser

WORKFLOW, STEP = "wf-test", "step-test"  # TriggerTestEnvironment's defaults
KEYWORD = "$Railyard_" + hashlib.sha256(f"{WORKFLOW}:{STEP}".encode()).hexdigest()[:10]


def mail(n: int, *, message_id: bool = True, size: int = 0) -> bytes:
    """A small plain-text message number ``n`` (Message-ID ``<n@example.org>``)."""
    message = EmailMessage()
    message["From"] = "Ada Lovelace <ada@example.org>"
    message["To"] = "orders@example.com"
    message["Subject"] = f"Order {n}"
    message["Date"] = "Mon, 06 Jan 2025 11:00:00 +0100"
    if message_id:
        message["Message-ID"] = f"<{n}@example.org>"
    message.set_content(f"Please send {n} boxes.\n" + "x" * size)
    return message.as_bytes()


def env_for(user: MailUser, **credential: Any) -> TriggerTestEnvironment:
    return TriggerTestEnvironment(
        credentials={"imap-1": user.credential(**credential)}, credential_types=[IMAP]
    )


def config(**extra: Any) -> dict[str, Any]:
    return {"credential": "imap-1", "start": "all", "timeout": 10, **extra}


async def wait_for_flag(user: MailUser, uid: int, flag: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if flag in (await asyncio.to_thread(user.flags)).get(uid, set()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"message {uid} never got {flag}")


def test_the_connector_declares_an_email_trigger_and_its_credential() -> None:
    assert connector.name == "imap" and list(connector.triggers) == [email_received]
    assert email_received.kind == "email" and email_received.type == "imap.email_received"
    assert [t.name for t in connector.credential_types] == ["imap"]
    assert IMAP.secret_fields == ("password",)


def test_mailbox_names_are_modified_utf7() -> None:
    assert encode_mailbox("INBOX") == '"INBOX"'
    assert encode_mailbox("Entwürfe") == '"Entw&APw-rfe"'
    assert encode_mailbox("R&D") == '"R&-D"'
    assert encode_mailbox('a "b"') == '"a \\"b\\""'
    with pytest.raises(sdk.ConfigError):
        encode_mailbox("bad\r\nname")


async def test_idle_delivers_new_mail_promptly_and_from_now(imap_server: Dovecot) -> None:
    user = imap_server.add_user()
    old = await asyncio.to_thread(user.deliver, mail(1))
    env = env_for(user)
    # a check every 20 minutes: only IDLE can make the delivery prompt
    listening = asyncio.create_task(
        env.listen(email_received, config(start="new", check_every=1200), count=2, timeout=20)
    )
    await wait_for_flag(user, old, KEYWORD)  # "from now": the old one is skipped
    sent = time.monotonic()
    first = await asyncio.to_thread(user.deliver, mail(2))
    second = await asyncio.to_thread(user.deliver, mail(3))
    got = await listening
    assert time.monotonic() - sent < 10
    assert [e.id for e in got.events] == ["<2@example.org>", "<3@example.org>"]
    flags = await asyncio.to_thread(user.flags)
    assert KEYWORD in flags[first]  # emit returned: flagged
    assert KEYWORD not in flags[second]  # emit never returned: not flagged
    assert "\\Seen" not in flags[first]  # mark_seen is off


async def test_polling_without_idle(imap_server_without_idle: Dovecot) -> None:
    user = imap_server_without_idle.add_user()
    old = await asyncio.to_thread(user.deliver, mail(1))
    env = env_for(user)
    listening = asyncio.create_task(
        env.listen(email_received, config(start="new", check_every=1), count=1, timeout=20)
    )
    await wait_for_flag(user, old, KEYWORD)
    await asyncio.to_thread(user.deliver, mail(2))
    got = await listening
    assert [e.id for e in got.events] == ["<2@example.org>"]


async def test_a_message_whose_emit_did_not_return_is_delivered_again(
    imap_server: Dovecot,
) -> None:
    user = imap_server.add_user()
    a = await asyncio.to_thread(user.deliver, mail(1))
    env = env_for(user)
    settings = config(mark_seen=True, check_every=1)
    first = await env.listen(email_received, settings, count=1)
    again = await env.listen(email_received, settings, count=1)
    assert [e.id for e in first.events] == [e.id for e in again.events] == ["<1@example.org>"]
    assert first.events[0].data == again.events[0].data
    b = await asyncio.to_thread(user.deliver, mail(2))
    both = await env.listen(email_received, settings, count=2)
    assert [e.id for e in both.events] == ["<1@example.org>", "<2@example.org>"]
    flags = await asyncio.to_thread(user.flags)
    assert {KEYWORD, "\\Seen"} <= flags[a] and KEYWORD not in flags[b]
    rest = await env.listen(email_received, settings, count=1)
    assert [e.id for e in rest.events] == ["<2@example.org>"]


async def test_text_html_and_attachments_are_parsed(imap_server: Dovecot) -> None:
    user = imap_server.add_user()
    pdf = b"%PDF-1.4 " + bytes(range(256))
    message = EmailMessage()
    message["From"] = '"Zoë Ünal" <zoe@example.org>'
    message["To"] = "orders@example.com, Bob <bob@example.com>"
    message["Cc"] = "audit@example.com"
    message["Subject"] = "Bestellung für Zoë"
    message["Date"] = "Mon, 06 Jan 2025 11:00:00 +0100"
    message["Message-ID"] = "<order-7@example.org>"
    message["In-Reply-To"] = "<quote-6@example.com>"
    message.set_content("Three boxes, please.\n")
    message.add_alternative("<p>Three <b>boxes</b>, please.</p>\n", subtype="html")
    message.add_attachment(pdf, maintype="application", subtype="pdf", filename="order.pdf")
    message.add_attachment(b"z" * 5000, maintype="image", subtype="png", filename="big.png")
    uid = await asyncio.to_thread(user.deliver, message.as_bytes())
    got = await env_for(user).listen(email_received, config(max_attachment_bytes=4096))
    event = got.events[0]
    assert event.id == "<order-7@example.org>"
    assert event.meta["message_id"] == "<order-7@example.org>"
    data = event.data
    assert data["headers"] == {
        "from": {"name": "Zoë Ünal", "address": "zoe@example.org"},
        "to": [
            {"name": "", "address": "orders@example.com"},
            {"name": "Bob", "address": "bob@example.com"},
        ],
        "cc": [{"name": "", "address": "audit@example.com"}],
        "reply_to": [],
        "subject": "Bestellung für Zoë",
        "date": "2025-01-06T10:00:00Z",
        "message_id": "<order-7@example.org>",
        "in_reply_to": "<quote-6@example.com>",
        "references": [],
    }
    assert data["text"] == "Three boxes, please.\n"
    assert data["html"] == "<p>Three <b>boxes</b>, please.</p>\n"
    small, big = data["attachments"]
    assert small == {
        "filename": "order.pdf",
        "content_type": "application/pdf",
        "size": len(pdf),
        "sha256": hashlib.sha256(pdf).hexdigest(),
        "content_id": "",
        "disposition": "attachment",
        "content_base64": base64.b64encode(pdf).decode(),
        "omitted": False,
    }
    assert big["size"] == 5000 and big["omitted"] is True and big["content_base64"] is None
    assert big["sha256"] == hashlib.sha256(b"z" * 5000).hexdigest()
    assert data["mailbox"] == "INBOX" and data["uid"] == uid
    assert data["received_at"].endswith("Z") and data["size"] > 5000


async def test_a_message_without_message_id_gets_uidvalidity_and_uid(
    imap_server: Dovecot,
) -> None:
    user = imap_server.add_user()
    uid = await asyncio.to_thread(user.deliver, mail(1, message_id=False))
    got = await env_for(user).listen(email_received, config())
    event = got.events[0]
    assert event.id == f"{event.data['uidvalidity']}:{uid}"
    assert event.data["uidvalidity"] > 0 and event.data["headers"]["message_id"] == ""


async def test_start_with_the_unread_messages(imap_server: Dovecot) -> None:
    user = imap_server.add_user()
    await asyncio.to_thread(user.deliver, mail(1), "INBOX", "\\Seen")
    await asyncio.to_thread(user.deliver, mail(2))
    got = await env_for(user).listen(email_received, config(start="unread"))
    assert [e.id for e in got.events] == ["<2@example.org>"]


async def test_another_mailbox_and_an_oversized_message(imap_server: Dovecot) -> None:
    user = imap_server.add_user()
    wire = '"Orders &- Returns"'  # "Orders & Returns" in modified UTF-7
    client = await asyncio.to_thread(user.client)
    assert (await asyncio.to_thread(client.create, wire))[0] == "OK"
    await asyncio.to_thread(client.logout)
    big = await asyncio.to_thread(user.deliver, mail(1, size=4000), wire)
    await asyncio.to_thread(user.deliver, mail(2), wire)
    settings = config(mailbox="Orders & Returns", max_message_bytes=2048)
    got = await env_for(user).listen(email_received, settings)
    assert [e.id for e in got.events] == ["<2@example.org>"]
    assert got.events[0].data["mailbox"] == "Orders & Returns"
    (dead,) = got.dead_letters
    assert "over the limit of 2048" in dead.reason
    assert dead.meta == {
        "mailbox": "Orders & Returns",
        "uid": str(big),
        "uidvalidity": dead.meta["uidvalidity"],
    }
    assert isinstance(dead.raw, bytes) and b"Subject: Order 1" in dead.raw
    flags = await asyncio.to_thread(user.flags, wire)
    assert KEYWORD in flags[big]  # dead-lettered, then flagged


@pytest.mark.parametrize("security", ["tls", "starttls"])
async def test_tls_and_starttls(imap_server: Dovecot, security: str) -> None:
    user = imap_server.add_user()
    await asyncio.to_thread(user.deliver, mail(1))
    got = await env_for(user, security=security).listen(email_received, config())
    assert [e.id for e in got.events] == ["<1@example.org>"]
    with pytest.raises(sdk.ActionError) as untrusted:
        await env_for(user, security=security, verify_tls=True).listen(email_received, config())
    assert untrusted.value.kind == "imap_connect"
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted.value.message


async def test_refused_login_missing_mailbox_and_private_hosts(imap_server: Dovecot) -> None:
    user = imap_server.add_user()
    with pytest.raises(sdk.NonRetryableError) as refused:
        await env_for(user, password="wrong").listen(email_received, config())
    assert refused.value.kind == "imap_auth" and user.name in refused.value.message
    assert "wrong" not in refused.value.message
    with pytest.raises(sdk.NonRetryableError) as missing:
        await env_for(user).listen(email_received, config(mailbox="Nowhere"))
    assert missing.value.kind == "imap_mailbox"
    guarded = env_for(user)
    guarded.ssrf = sdk.SsrfPolicy()
    with pytest.raises(sdk.NonRetryableError) as blocked:
        await guarded.listen(email_received, config())
    assert blocked.value.kind == "ssrf_blocked"
    with pytest.raises(sdk.ConfigError) as keyword:
        await env_for(user).listen(email_received, config(keyword="bad keyword"))
    assert keyword.value.details == {"field": "keyword"}


async def test_a_closed_server_is_a_retryable_connect_error() -> None:
    env = TriggerTestEnvironment(
        credentials={
            "imap-1": {
                "type": "imap",
                "host": "127.0.0.1",
                "port": 1,
                "security": "none",
                "username": "x",
                "password": "y",
            }
        },
        credential_types=[IMAP],
    )
    with pytest.raises(sdk.ActionError) as failed:
        await env.listen(email_received, config())
    assert failed.value.kind == "imap_connect" and failed.value.retryable


class Recording:
    """An ``emit`` that returns at once (the run stored), keeping what it got."""

    def __init__(self) -> None:
        self.events: list[sdk.TriggerEvent] = []
        self.arrived = asyncio.Event()

    async def __call__(self, event: sdk.TriggerEvent) -> None:
        self.events.append(event)
        self.arrived.set()

    async def dead_letter(self, reason: str, raw: bytes | str, meta: dict[str, str]) -> None:
        raise AssertionError(f"unexpected dead letter: {reason}")


async def test_the_server_going_away_ends_the_subscription_at_once(
    own_imap_server: Dovecot,
) -> None:
    user = own_imap_server.add_user()
    old = await asyncio.to_thread(user.deliver, mail(0))
    env = env_for(user)
    emit = Recording()
    context = env.context_for(env._info(email_received), {})
    # in IDLE with a renewal only every 20 minutes: only the lost connection can end it
    listening = asyncio.create_task(
        email_received.call("listen", config(check_every=1200), context, emit)
    )
    # the listener is in the mailbox once it took (and flagged) the message already there:
    # only then is the server's going away the one thing that can end it
    await wait_for_flag(user, old, KEYWORD, timeout=30)
    emit.arrived.clear()
    first = await asyncio.to_thread(user.deliver, mail(1))
    await asyncio.wait_for(emit.arrived.wait(), 30)
    await wait_for_flag(user, first, KEYWORD)
    await asyncio.to_thread(own_imap_server.stop)
    with pytest.raises(sdk.ActionError) as lost:
        await asyncio.wait_for(listening, 30)
    assert lost.value.kind == "imap_connect" and lost.value.retryable
    await asyncio.to_thread(own_imap_server.restart)
    await asyncio.to_thread(user.deliver, mail(2))
    got = await env.listen(email_received, config())
    assert [e.id for e in got.events] == ["<2@example.org>"]  # the first one was marked


def test_uid_sets_are_compact_and_short() -> None:
    assert uid_sets([1, 2, 3, 7, 9, 10, 11, 12]) == ["1:3,7,9:12"]
    assert uid_sets([]) == [] and uid_sets([5]) == ["5"]
    many = uid_sets(list(range(1, 20_000, 2)), max_chars=100)
    assert all(len(s) < 110 for s in many)
    assert [int(u) for s in many for u in s.split(",")] == list(range(1, 20_000, 2))


@pytest.mark.parametrize(("field", "value"), [("keyword", "bad keyword"), ("mailbox", "In\x01box")])
def test_a_keyword_or_mailbox_imap_cannot_carry_is_a_compile_error(field: str, value: str) -> None:
    node = Node(id="mail", type="imap.email_received", config={"credential": "c1", field: value})
    found = trigger_diagnostics(Diagram(nodes=[node], edges=[]), builtin_catalog())
    assert [(d.severity, d.code, d.node_id, d.field) for d in found] == [
        ("error", "invalid_config", "mail", field)
    ]
