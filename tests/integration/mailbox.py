"""What the email trigger's integration tests share: an order mail with its own
Message-ID, and a published workflow watching a Dovecot user's INBOX."""

from __future__ import annotations

from email.message import EmailMessage
from typing import Any

import httpx

from tests.diagrams import diagram, edge, node
from tests.imap_server import MailUser
from tests.integration.flows import publish


def message_id(n: int) -> str:
    """The Message-ID of :func:`mail` ``n``."""
    return f"<order-{n}@example.org>"


def mail(n: int) -> bytes:
    """An RFC 5322 message "Order ``n``" with the Message-ID :func:`message_id` ``n``."""
    message = EmailMessage()
    message["From"] = "Ada <ada@example.org>"
    message["To"] = "orders@example.com"
    message["Subject"] = f"Order {n}"
    message["Message-ID"] = message_id(n)
    message.set_content(f"{n} boxes, please.")
    return message.as_bytes()


async def published_watch(
    client: httpx.AsyncClient, user: MailUser, **config: Any
) -> dict[str, Any]:
    """Publish ``imap.email_received`` on ``user``'s INBOX through an ``imap`` credential
    (every message: ``start="all"``; ``config`` adds fields) -> Set ``subject``; the
    workflow (flows.py, :func:`~tests.integration.flows.publish`)."""
    credential = user.credential()
    credential.pop("type")
    r = await client.post(
        "/api/credentials", json={"name": "Orders mailbox", "type": "imap", "data": credential}
    )
    assert r.status_code == 201, r.text
    doc = diagram(
        [
            node("mail", "imap.email_received", credential=r.json()["id"], start="all", **config),
            node("set_1", "control.set", mapping={"subject": "=headers.subject"}),
        ],
        [edge("mail", "set_1")],
    )
    return await publish(client, doc)
