"""Email connector against a real local SMTP server (aiosmtpd)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from connectors import sdk
from connectors.builtin.email import SMTP, send_email
from connectors.testing import ActionTestEnvironment
from tests.fakes.smtp import SmtpServer
from tests.unit.connectors.output_schema import assert_declared_output


def _env(server: SmtpServer, **overrides: object) -> ActionTestEnvironment:
    cred = {
        "type": "smtp",
        "host": "127.0.0.1",
        "port": server.port,
        "security": {"plain": "none"}.get(server.mode, server.mode),
        "username": "mailer",
        "password": "s3cret-password",
        "from_address": "robot@example.com",
        "verify_tls": False,
        **overrides,
    }
    return ActionTestEnvironment(credentials={"smtp": cred}, credential_types=[SMTP])


@pytest.fixture(params=["plain", "starttls", "tls"])
def smtp_server(request: pytest.FixtureRequest) -> Iterator[SmtpServer]:
    server = SmtpServer(request.param, users={"mailer": "s3cret-password"}).start()
    yield server
    server.stop()


async def test_send_text_html_and_attachment(smtp_server: SmtpServer) -> None:
    config = {
        "credential": "smtp",
        "to": ["ada@example.com"],
        "cc": ["bob@example.com"],
        "subject": "Order {{ input.order }}",
        "text": "Hello {{ data.name }}",
        "html": "<p>Hello {{ data.name }}</p>",
        "data": {"name": "<Ada>"},
        "attachments": [
            {"filename": "a.txt", "content_base64": base64.b64encode(b"abc").decode()},
            {
                "filename": "b.bin",
                "file": {
                    "base64": base64.b64encode(b"\x00\x01").decode(),
                    "content_type": "image/png",
                },
            },
        ],
    }
    out = await _env(smtp_server).run(send_email, config, {"order": 42})
    assert out["accepted"] == ["ada@example.com", "bob@example.com"]
    assert out["refused"] == {}
    [msg] = smtp_server.messages
    assert msg["Subject"] == "Order 42"
    assert msg["Message-ID"] == out["message_id"]
    assert smtp_server.envelopes == [("robot@example.com", ["ada@example.com", "bob@example.com"])]
    text = msg.get_body(("plain",))
    html = msg.get_body(("html",))
    assert text is not None and text.get_content().strip() == "Hello <Ada>"
    assert html is not None and "<p>Hello &lt;Ada&gt;</p>" in html.get_content()
    attachments = {a.get_filename(): a for a in msg.iter_attachments()}
    assert (
        attachments["a.txt"].get_content() == "abc"
        or attachments["a.txt"].get_payload(decode=True) == b"abc"
    )
    assert attachments["b.bin"].get_content_type() == "image/png"


async def test_message_id_is_stable_across_retries(smtp_server: SmtpServer) -> None:
    config = {"credential": "smtp", "to": ["a@example.com"], "subject": "s", "text": "t"}
    env = _env(smtp_server)
    first = await env.run(send_email, config, None)
    env.attempt = 2
    second = await env.run(send_email, config, None)
    assert first["message_id"] == second["message_id"]


async def test_wrong_password_is_not_retryable() -> None:
    server = SmtpServer("starttls", users={"mailer": "s3cret-password"}).start()
    try:
        with pytest.raises(sdk.NonRetryableError) as err:
            await _env(server, password="wrong").run(
                send_email,
                {"credential": "smtp", "to": ["a@example.com"], "subject": "s", "text": "t"},
                None,
            )
        assert err.value.kind == "smtp_auth"
        assert server.messages == []
    finally:
        server.stop()


async def test_template_errors_and_missing_body() -> None:
    server = SmtpServer("plain").start()
    try:
        env = _env(server, username="", password="")
        with pytest.raises(sdk.NonRetryableError) as err:
            await env.run(
                send_email,
                {
                    "credential": "smtp",
                    "to": ["a@example.com"],
                    "subject": "s",
                    "text": "{{ nope.x }}",
                },
                None,
            )
        assert err.value.kind == "template_error"
        with pytest.raises(sdk.ConfigError):
            await env.run(
                send_email, {"credential": "smtp", "to": ["a@example.com"], "subject": "s"}, None
            )
        sandboxed = "{{ input.__class__.__mro__ }}"
        with pytest.raises(sdk.NonRetryableError):
            await env.run(
                send_email,
                {"credential": "smtp", "to": ["a@example.com"], "subject": "s", "text": sandboxed},
                {"x": 1},
            )
        assert server.messages == []
    finally:
        server.stop()


async def test_connection_refused_is_retryable() -> None:
    server = SmtpServer("plain")  # never started
    with pytest.raises(sdk.ActionError) as err:
        await _env(server, username="", password="").run(
            send_email,
            {"credential": "smtp", "to": ["a@example.com"], "subject": "s", "text": "t"},
            None,
        )
    assert err.value.retryable and err.value.kind == "smtp_connect"


class _RefusesNowhere:
    """An aiosmtpd handler that refuses recipients at ``nowhere.example`` (550) and keeps
    the others' messages on ``server``."""

    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, options: list[str]
    ) -> str:
        if address.endswith("@nowhere.example"):
            return "550 5.1.1 no such mailbox"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.server.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"


async def test_send_output_matches_declared_schema() -> None:
    server = SmtpServer("plain")
    server.controller.handler = _RefusesNowhere(server)
    server.start()
    try:
        out = await _env(server, username="", password="").run(
            send_email,
            {
                "credential": "smtp",
                "to": ["ada@example.com", "ghost@nowhere.example"],
                "bcc": ["audit@example.com"],
                "subject": "s",
                "text": "t",
            },
            None,
        )
    finally:
        server.stop()
    assert out["accepted"] == ["ada@example.com", "audit@example.com"]
    assert out["refused"] == {"ghost@nowhere.example": "550 5.1.1 no such mailbox"}
    assert server.envelopes == [("robot@example.com", ["ada@example.com", "audit@example.com"])]
    assert_declared_output(send_email, out)
