"""Local HTTP servers on 127.0.0.1 emulating third-party APIs as documented.

- :class:`SlackLike`: ``POST /api/chat.postMessage`` (Bearer auth; ``ok``/``error``
  bodies; 429 with ``Retry-After``) and ``POST /hooks/<id>`` incoming webhooks (``ok`` or
  plain-text error codes).
- :class:`HubSpotLike`: CRM v3 contacts (create, update, batch upsert by email, search),
  deals (create) and the v4 default association, with HubSpot's error bodies
  ``{status, message, correlationId, category}`` and ``X-HubSpot-RateLimit-*`` headers.

Each server records every request (method, path, headers, JSON body) in ``requests``.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class LocalApi:
    """Base: a threaded HTTP server calling :meth:`route` for every request."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                rec = Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with api.lock:
                    api.requests.append(rec)
                    status, headers, payload = api.route(rec)
                self.send_response(status)
                headers.setdefault("Content-Type", "application/json; charset=utf-8")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> LocalApi:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def route(self, req: Recorded) -> Reply:  # pragma: no cover - overridden
        raise NotImplementedError


def _json(status: int, body: Any, **headers: str) -> Reply:
    return status, dict(headers), json.dumps(body).encode()


class SlackLike(LocalApi):
    """Slack Web API subset. Tokens in ``tokens`` are valid; channels in ``channels`` exist.

    ``rate_limit_next`` > 0 makes the next N chat.postMessage calls answer 429
    ``Retry-After: 1`` (Slack's documented rate limiting).
    """

    def __init__(self) -> None:
        super().__init__()
        self.tokens = {"xoxb-valid-token"}
        self.channels = {"C123": "general"}
        self.rate_limit_next = 0
        self.webhooks = {"T1/B1/secretpath": "C123"}
        self.posted: list[dict[str, Any]] = []
        self._ts = itertools.count(1)

    def route(self, req: Recorded) -> Reply:
        if req.path == "/api/chat.postMessage" and req.method == "POST":
            if self.rate_limit_next > 0:
                self.rate_limit_next -= 1
                return _json(429, {"ok": False, "error": "ratelimited"}, **{"Retry-After": "1"})
            auth = req.headers.get("authorization", "")
            if not auth.startswith("Bearer "):
                return _json(200, {"ok": False, "error": "not_authed"})
            if auth[7:] not in self.tokens:
                return _json(200, {"ok": False, "error": "invalid_auth"})
            body = req.body if isinstance(req.body, dict) else {}
            channel = body.get("channel", "")
            channel = next((c for c, n in self.channels.items() if f"#{n}" == channel), channel)
            if channel not in self.channels:
                return _json(200, {"ok": False, "error": "channel_not_found"})
            if not body.get("text") and not body.get("blocks"):
                return _json(200, {"ok": False, "error": "no_text"})
            if body.get("blocks") is not None and not isinstance(body["blocks"], list):
                return _json(200, {"ok": False, "error": "invalid_blocks"})
            ts = f"1700000000.{next(self._ts):06d}"
            message = {"type": "message", "text": body.get("text", ""), "ts": ts}
            if body.get("thread_ts"):
                message["thread_ts"] = body["thread_ts"]
            self.posted.append({"channel": channel, **body, "ts": ts})
            return _json(200, {"ok": True, "channel": channel, "ts": ts, "message": message})
        if req.path.startswith("/hooks/") and req.method == "POST":
            key = req.path[len("/hooks/") :]
            if key not in self.webhooks:
                return 404, {"Content-Type": "text/plain"}, b"no_service"
            body = req.body if isinstance(req.body, dict) else None
            if body is None or (not body.get("text") and not body.get("blocks")):
                return 400, {"Content-Type": "text/plain"}, b"invalid_payload"
            self.posted.append({"channel": self.webhooks[key], **body})
            return 200, {"Content-Type": "text/plain"}, b"ok"
        return _json(404, {"ok": False, "error": "unknown_method"})


@dataclass
class _Object:
    id: str
    properties: dict[str, Any]
    created: str = "2026-01-01T00:00:00.000Z"

    def out(self, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "properties": dict(self.properties),
            "createdAt": self.created,
            "updatedAt": self.created,
            "archived": False,
            **extra,
        }


@dataclass
class HubSpotLike(LocalApi):
    """HubSpot CRM subset with rate-limit headers; ``rate_limit_next`` forces 429s."""

    token: str = "pat-valid"
    rate_limit_next: int = 0
    contacts: dict[str, _Object] = field(default_factory=dict)
    deals: dict[str, _Object] = field(default_factory=dict)
    associations: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        LocalApi.__init__(self)
        self._ids = itertools.count(101)

    def _error(self, status: int, category: str, message: str, **headers: str) -> Reply:
        body = {
            "status": "error",
            "message": message,
            "correlationId": str(uuid.uuid4()),
            "category": category,
        }
        return _json(status, body, **headers)

    def _limits(self, remaining: int) -> dict[str, str]:
        return {
            "X-HubSpot-RateLimit-Daily": "250000",
            "X-HubSpot-RateLimit-Daily-Remaining": "249000",
            "X-HubSpot-RateLimit-Interval-Milliseconds": "10000",
            "X-HubSpot-RateLimit-Max": "100",
            "X-HubSpot-RateLimit-Remaining": str(remaining),
        }

    def _by_email(self, email: str) -> _Object | None:
        return next(
            (c for c in self.contacts.values() if c.properties.get("email") == email.lower()),
            None,
        )

    def route(self, req: Recorded) -> Reply:
        if req.headers.get("authorization") != f"Bearer {self.token}":
            return self._error(
                401,
                "INVALID_AUTHENTICATION",
                "Authentication credentials not found.",
            )
        if self.rate_limit_next > 0:
            self.rate_limit_next -= 1
            return self._error(
                429, "RATE_LIMITS", "You have reached your secondly limit.", **self._limits(0)
            )
        status, headers, body = self._route(req)
        return status, {**self._limits(99), **headers}, body

    def _props(self, req: Recorded) -> dict[str, Any] | None:
        body = req.body if isinstance(req.body, dict) else {}
        props = body.get("properties")
        return props if isinstance(props, dict) else None

    def _route(self, req: Recorded) -> Reply:
        path, method = req.path.split("?")[0], req.method
        parts = path.strip("/").split("/")
        if path == "/crm/v3/objects/contacts" and method == "POST":
            props = self._props(req)
            if props is None:
                return self._error(400, "VALIDATION_ERROR", "Invalid input JSON: properties")
            email = str(props.get("email", "")).lower()
            if email and (existing := self._by_email(email)) is not None:
                return self._error(
                    409, "CONFLICT", f"Contact already exists. Existing ID: {existing.id}"
                )
            obj = _Object(str(next(self._ids)), {**props, "email": email} if email else props)
            self.contacts[obj.id] = obj
            return _json(201, obj.out())
        if parts[:4] == ["crm", "v3", "objects", "contacts"] and len(parts) == 5:
            if parts[4] in ("search", "batch"):
                pass
            elif method == "PATCH":
                obj = self.contacts.get(parts[4])
                if obj is None:
                    return self._error(404, "OBJECT_NOT_FOUND", "resource not found")
                props = self._props(req)
                if props is None:
                    return self._error(400, "VALIDATION_ERROR", "Invalid input JSON: properties")
                obj.properties.update(props)
                return _json(200, obj.out())
        if path == "/crm/v3/objects/contacts/batch/upsert" and method == "POST":
            inputs = (req.body or {}).get("inputs") or []
            results = []
            for item in inputs:
                if item.get("idProperty") != "email":
                    return self._error(400, "VALIDATION_ERROR", "idProperty must be unique")
                email = str(item["id"]).lower()
                obj = self._by_email(email)
                new = obj is None
                if obj is None:
                    obj = _Object(str(next(self._ids)), {"email": email})
                    self.contacts[obj.id] = obj
                obj.properties.update(item.get("properties") or {})
                obj.properties["email"] = email
                results.append(obj.out(new=new))
            return _json(200, {"status": "COMPLETE", "results": results})
        if path == "/crm/v3/objects/contacts/search" and method == "POST":
            body = req.body or {}
            filters = [f for g in body.get("filterGroups", []) for f in g.get("filters", [])]
            found = []
            for obj in self.contacts.values():
                if all(
                    f["operator"] == "EQ"
                    and str(obj.properties.get(f["propertyName"], "")).lower()
                    == str(f.get("value", "")).lower()
                    for f in filters
                ):
                    wanted = body.get("properties") or ["email"]
                    found.append(
                        {
                            **obj.out(),
                            "properties": {k: obj.properties.get(k) for k in wanted},
                        }
                    )
            limit = int(body.get("limit", 10))
            after = int(body.get("after") or 0)
            page = found[after : after + limit]
            out: dict[str, Any] = {"total": len(found), "results": page}
            if after + limit < len(found):
                out["paging"] = {"next": {"after": str(after + limit)}}
            return _json(200, out)
        if path == "/crm/v3/objects/deals" and method == "POST":
            props = self._props(req)
            if props is None or "dealname" not in props:
                return self._error(
                    400, "VALIDATION_ERROR", "Property values were not valid: dealname required"
                )
            obj = _Object(str(next(self._ids)), props)
            self.deals[obj.id] = obj
            return _json(201, obj.out())
        if (
            len(parts) == 9
            and parts[:4] == ["crm", "v4", "objects", "deals"]
            and parts[5:8] == ["associations", "default", "contacts"]
            and method == "PUT"
        ):
            return self._associate(parts[4], parts[8])
        return self._error(404, "OBJECT_NOT_FOUND", f"no route for {method} {path}")

    def _associate(self, deal_id: str, contact_id: str) -> Reply:
        if deal_id not in self.deals or contact_id not in self.contacts:
            return self._error(404, "OBJECT_NOT_FOUND", "deal or contact not found")
        if (deal_id, contact_id) not in self.associations:
            self.associations.append((deal_id, contact_id))
        return _json(
            200,
            {
                "status": "COMPLETE",
                "results": [
                    {
                        "from": {"id": deal_id},
                        "to": {"id": contact_id},
                        "associationSpec": {
                            "associationCategory": "HUBSPOT_DEFINED",
                            "associationTypeId": 3,
                        },
                    }
                ],
            },
        )


Factory = Callable[[], LocalApi]
