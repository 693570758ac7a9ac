"""Local emulators of the messaging APIs the Teams, Discord, Telegram and Twilio nodes
call, answering as each service documents it (authentication, error bodies, 429 with
its wait). Each records its requests (:class:`tests.fakes.apis.Recorded`); set
``rate_limit_next`` to N to make the next N sends answer 429.

- :class:`TeamsLike`: a workflow webhook at ``/workflows/<id>?sig=<secret>``: ``202``
  for a message activity holding an Adaptive Card, ``400`` for anything else, ``404``
  for an unknown URL, ``429`` with ``Retry-After``.
- :class:`DiscordLike`: ``POST /api/v10/channels/<id>/messages`` (``Authorization: Bot
  <token>``; ``401 {"message": "401: Unauthorized", "code": 0}``; unknown channel
  ``404 {"code": 10003}``; empty message ``400 {"code": 50006}``; a repeated ``nonce``
  with ``enforce_nonce`` returns the first message) and ``POST
  /api/webhooks/<id>/<token>?wait=true`` (unknown webhook ``404 {"code": 10015}``);
  ``429 {"message", "retry_after", "global"}`` with ``Retry-After``.
- :class:`TelegramLike`: ``POST /bot<token>/sendMessage`` with the Bot API's
  ``{"ok", "result"}`` / ``{"ok": false, "error_code", "description", "parameters"}``.
- :class:`TwilioLike`: ``POST /2010-04-01/Accounts/<sid>/Messages.json`` (form body,
  HTTP Basic with the account SID and auth token): ``201`` with the Message resource,
  errors ``{"code", "message", "more_info", "status"}`` (20003, 21211, 21602, 20429).
"""

from __future__ import annotations

import base64
import itertools
import re
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.apis import LocalApi, Recorded, Reply, _json

__all__ = ["DiscordLike", "TeamsLike", "TelegramLike", "TwilioLike"]


class _Limited(LocalApi):
    def __init__(self) -> None:
        super().__init__()
        self.rate_limit_next = 0
        self.ids = itertools.count(1001)

    def limited(self) -> bool:
        if self.rate_limit_next > 0:
            self.rate_limit_next -= 1
            return True
        return False


class TeamsLike(_Limited):
    """A Teams workflow webhook; ``hook_path`` is the valid URL's path and query."""

    hook_path = "/workflows/7d1/triggers/manual/paths/invoke?sig=teams-signature-3f9a"
    CARD = "application/vnd.microsoft.card.adaptive"

    def route(self, req: Recorded) -> Reply:
        if req.method != "POST" or req.path != self.hook_path:
            return _json(404, {"error": {"code": "TriggerNotFound", "message": "not found"}})
        if self.limited():
            return _json(429, {"error": {"code": "TooManyRequests"}}, **{"Retry-After": "2"})
        body = req.body if isinstance(req.body, dict) else {}
        attachments = body.get("attachments") or []
        if (
            body.get("type") != "message"
            or not attachments
            or any(
                a.get("contentType") != self.CARD
                or a.get("content", {}).get("type") != "AdaptiveCard"
                for a in attachments
            )
        ):
            return _json(400, {"error": {"code": "InvalidRequestContent"}})
        return 202, {}, b""


class DiscordLike(_Limited):
    """Discord's API v10 subset; ``token`` is the valid bot token, ``channels`` exist,
    ``webhooks`` maps ``<id>/<token>`` to a channel."""

    token = "discord-bot-token-51c2"

    def __init__(self) -> None:
        super().__init__()
        self.channels = {"123456789012345678"}
        self.webhooks = {"555/webhook-token-9e1": "123456789012345678"}
        self.by_nonce: dict[str, dict[str, Any]] = {}

    def _create(self, channel: str, body: Any) -> Reply:
        if not isinstance(body, dict) or not (body.get("content") or body.get("embeds")):
            return _json(400, {"message": "Cannot send an empty message", "code": 50006})
        nonce = body.get("nonce")
        if body.get("enforce_nonce") and nonce in self.by_nonce:
            return _json(200, self.by_nonce[nonce])
        message = {
            "id": str(next(self.ids)),
            "channel_id": channel,
            "content": body.get("content", ""),
            "embeds": body.get("embeds", []),
            "timestamp": datetime.now(UTC).isoformat(),
        }
        if nonce:
            self.by_nonce[nonce] = message
        return _json(200, message)

    def route(self, req: Recorded) -> Reply:
        parts = urlsplit(req.path)
        if self.limited():
            return _json(
                429,
                {"message": "You are being rate limited.", "retry_after": 1.5, "global": False},
                **{"Retry-After": "1", "X-RateLimit-Scope": "user"},
            )
        channel = re.fullmatch(r"/api/v10/channels/(\d+)/messages", parts.path)
        if channel and req.method == "POST":
            if req.headers.get("authorization") != f"Bot {self.token}":
                return _json(401, {"message": "401: Unauthorized", "code": 0})
            if channel[1] not in self.channels:
                return _json(404, {"message": "Unknown Channel", "code": 10003})
            return self._create(channel[1], req.body)
        hook = re.fullmatch(r"/api/webhooks/(\d+/[\w-]+)", parts.path)
        if hook and req.method == "POST":
            if hook[1] not in self.webhooks:
                return _json(404, {"message": "Unknown Webhook", "code": 10015})
            reply = self._create(self.webhooks[hook[1]], req.body)
            if parse_qs(parts.query).get("wait") != ["true"]:
                return 204, {}, b""
            return reply
        return _json(404, {"message": "404: Not Found", "code": 0})


class TelegramLike(_Limited):
    """The Bot API's sendMessage; ``token`` is valid and ``chats`` exist."""

    token = "123456:telegram-token-ABCdef"

    def __init__(self) -> None:
        super().__init__()
        self.chats = {"42", "@railyard_news"}

    def route(self, req: Recorded) -> Reply:
        match = re.fullmatch(r"/bot([^/]+)/sendMessage", urlsplit(req.path).path)
        if not match or req.method != "POST":
            return _json(404, {"ok": False, "error_code": 404, "description": "Not Found"})
        if match[1] != self.token:
            return _json(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        if self.limited():
            return _json(
                429,
                {
                    "ok": False,
                    "error_code": 429,
                    "description": "Too Many Requests: retry after 3",
                    "parameters": {"retry_after": 3},
                },
            )
        body = req.body if isinstance(req.body, dict) else {}
        chat = str(body.get("chat_id", ""))
        if chat not in self.chats:
            return _json(
                400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}
            )
        if not body.get("text"):
            return _json(
                400,
                {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: message text is empty",
                },
            )
        result = {
            "message_id": next(self.ids),
            "chat": {"id": 42 if chat == "42" else -100123, "type": "private"},
            "date": int(datetime.now(UTC).timestamp()),
            "text": body["text"],
        }
        return _json(200, {"ok": True, "result": result})


class TwilioLike(_Limited):
    """Twilio's Message resource; ``account_sid``/``auth_token`` is the valid login and
    ``numbers`` the account's sending numbers."""

    account_sid = "AC" + "0123456789abcdef" * 2
    auth_token = "twilio-auth-token-8d2e"

    def __init__(self) -> None:
        super().__init__()
        self.numbers = {"+15005550006"}

    def _error(self, status: int, code: int, message: str) -> Reply:
        body = {
            "code": code,
            "message": message,
            "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status,
        }
        headers = {"Retry-After": "1"} if status == 429 else {}
        return _json(status, body, **headers)

    def route(self, req: Recorded) -> Reply:
        match = re.fullmatch(r"/2010-04-01/Accounts/(\w+)/Messages\.json", req.path)
        if not match or req.method != "POST":
            return self._error(404, 20404, "The requested resource was not found")
        expected = base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        if match[1] != self.account_sid or req.headers.get("authorization") != f"Basic {expected}":
            return self._error(401, 20003, "Authenticate")
        if self.limited():
            return self._error(429, 20429, "Too Many Requests")
        if not req.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return self._error(400, 20001, "Bad Request")
        form = {k: v[0] for k, v in parse_qs(str(req.body or "")).items()}
        if not re.fullmatch(r"\+[1-9]\d{6,14}", form.get("To", "")):
            return self._error(
                400, 21211, f"The 'To' number {form.get('To', '')} is not a valid phone number."
            )
        if form.get("From") not in self.numbers and not form.get("MessagingServiceSid"):
            return self._error(
                400,
                21606,
                "The From phone number is not a valid, SMS-capable inbound phone number.",
            )
        now = format_datetime(datetime.now(UTC), usegmt=True)
        message = {
            "sid": f"SM{next(self.ids):032x}",
            "status": "queued",
            "to": form["To"],
            "from": form.get("From"),
            "body": form.get("Body", ""),
            "date_created": now,
            "account_sid": self.account_sid,
        }
        return _json(201, message)
