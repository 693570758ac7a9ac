"""Local HTTP servers on 127.0.0.1 emulating third-party APIs as documented.

- :class:`SlackLike`: ``POST /api/chat.postMessage`` (Bearer auth; ``ok``/``error``
  bodies; 429 with ``Retry-After``) and ``POST /hooks/<id>`` incoming webhooks (``ok`` or
  plain-text error codes).
- :class:`HubSpotLike`: CRM v3 contacts (create, update, batch upsert by email, search),
  deals (create) and the v4 default association, with HubSpot's error bodies
  ``{status, message, correlationId, category}`` and ``X-HubSpot-RateLimit-*`` headers.
  The search follows HubSpot's "CRM search" guide: filter groups (OR of ANDed filters;
  ``EQ``, ``NEQ``, ``GT``, ``GTE``, ``LT``, ``LTE``, ``BETWEEN``, ``IN``, ``NOT_IN``,
  ``HAS_PROPERTY``, ``NOT_HAS_PROPERTY``, ``CONTAINS_TOKEN``; date-time properties compared
  as milliseconds), one sort, ``limit`` up to 200, ``after`` offsets with
  ``paging.next.after``, the 10,000-result cap (400 past it) and an optional secondly rate
  limit answering 429 with HubSpot's documented body.

Slack's Events API (the sender side, which calls a trigger's URL) is
:class:`tests.fakes.slack_events.SlackEvents`.

Each server records every request (method, path, headers, JSON body) in ``requests``.
"""

from __future__ import annotations

import itertools
import json
import operator
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Any, Self

from tests.local_http import LocalHTTPServer

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
        self.lock = threading.RLock()  # routes may call helpers that take it
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

        self.server = LocalHTTPServer(("127.0.0.1", 0), Handler)
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

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

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


JAN_2026_MS = 1_767_225_600_000
DATETIME_PROPERTIES = frozenset({"createdate", "lastmodifieddate", "hs_lastmodifieddate"})
DEFAULT_SEARCH_PROPERTIES = (
    "createdate",
    "email",
    "firstname",
    "hs_object_id",
    "lastmodifieddate",
    "lastname",
)
"""What a contact search returns when it names no ``properties`` (HubSpot's guide)."""


def _iso(ms: int) -> str:
    """HubSpot's timestamp text: ``2026-01-01T00:00:00.000Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{ms % 1000:03d}Z"
    )


def _to_ms(value: Any) -> int | None:
    """A filter value or stored timestamp in milliseconds (digits or ISO 8601 text)."""
    text = str(value or "")
    if text.isdigit():
        return int(text)
    try:
        return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


@dataclass
class _Object:
    id: str
    properties: dict[str, Any]
    created_ms: int = JAN_2026_MS
    modified_ms: int = JAN_2026_MS

    def comparable(self, name: str) -> Any:
        """A property as search compares and sorts it (:func:`_comparable`)."""
        if name == "createdate":
            return self.created_ms
        if name in ("lastmodifieddate", "hs_lastmodifieddate"):
            return self.modified_ms
        return _comparable(name, self.value(name))

    def value(self, name: str) -> Any:
        """A property as HubSpot reports it, the system ones included."""
        if name == "createdate":
            return _iso(self.created_ms)
        if name in ("lastmodifieddate", "hs_lastmodifieddate"):
            return _iso(self.modified_ms)
        if name == "hs_object_id":
            return self.id
        return self.properties.get(name)

    def out(self, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "properties": dict(self.properties),
            "createdAt": _iso(self.created_ms),
            "updatedAt": _iso(self.modified_ms),
            "archived": False,
            **extra,
        }


@dataclass
class HubSpotLike(LocalApi):
    """HubSpot CRM subset with rate-limit headers.

    ``rate_limit_next`` forces that many 429s (ten-secondly window headers);
    ``search_per_second`` (HubSpot's search allows 5) answers search requests over that
    rate with the documented secondly-limit 429; ``retry_after`` adds a ``Retry-After``
    header to every 429. ``clock`` (Unix seconds) stamps ``createdate`` and
    ``lastmodifieddate`` on writes; :meth:`add_contact` and :meth:`modify_contact` set
    them directly. ``search_cap`` is how far a search pages (HubSpot: 10,000).
    ``after_search`` is called after each search is answered (to change contacts between
    the pages of one poll).
    """

    token: str = "pat-valid"
    rate_limit_next: int = 0
    search_per_second: int | None = None
    retry_after: str | None = None
    search_cap: int = 10_000
    clock: Callable[[], float] = time.time
    after_search: Callable[[HubSpotLike], None] | None = None
    contacts: dict[str, _Object] = field(default_factory=dict)
    deals: dict[str, _Object] = field(default_factory=dict)
    associations: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        LocalApi.__init__(self)
        self._ids = itertools.count(101)
        self._searches: deque[float] = deque()

    def environment(self, token: str = "pat-valid") -> dict[str, Any]:
        """Arguments of a connector test environment talking to this server: its URL as
        the ``hubspot.api_url`` setting and a private-app credential ``"hs"``."""
        return {
            "settings": {"hubspot.api_url": self.url},
            "credentials": {
                "hs": {"type": "hubspot.private_app", "kind": "bearer", "token": token}
            },
        }

    def _now_ms(self) -> int:
        return round(self.clock() * 1000)

    def _new(self, properties: dict[str, Any]) -> _Object:
        now = self._now_ms()
        return _Object(str(next(self._ids)), properties, created_ms=now, modified_ms=now)

    def add_contact(
        self,
        properties: dict[str, Any] | None = None,
        *,
        created_ms: int | None = None,
        modified_ms: int | None = None,
    ) -> str:
        """Store a contact created at ``created_ms`` (now) and last modified at
        ``modified_ms`` (its creation); returns its id."""
        with self.lock:
            obj = self._new(dict(properties or {}))
            if created_ms is not None:
                obj.created_ms = obj.modified_ms = created_ms
            if modified_ms is not None:
                obj.modified_ms = modified_ms
            self.contacts[obj.id] = obj
            return obj.id

    def modify_contact(
        self, contact_id: str, properties: dict[str, Any] | None = None, *, at_ms: int | None = None
    ) -> None:
        """Change a contact as a user would: ``lastmodifieddate`` becomes ``at_ms`` (now)."""
        with self.lock:
            obj = self.contacts[contact_id]
            obj.properties.update(properties or {})
            obj.modified_ms = self._now_ms() if at_ms is None else at_ms

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
        extra = {"Retry-After": self.retry_after} if self.retry_after is not None else {}
        if self.rate_limit_next > 0:
            self.rate_limit_next -= 1
            return self._error(
                429,
                "RATE_LIMITS",
                "You have reached your secondly limit.",
                **self._limits(0),
                **extra,
            )
        if req.path.endswith("/search") and self._over_search_rate():
            body = {  # HubSpot's documented 429 of its secondly limit
                "status": "error",
                "message": "You have reached your secondly limit.",
                "errorType": "RATE_LIMIT",
                "correlationId": str(uuid.uuid4()),
                "policyName": "SECONDLY",
                "requestId": str(uuid.uuid4()),
            }
            limit = str(self.search_per_second)
            return _json(
                429,
                body,
                **{
                    "X-HubSpot-RateLimit-Secondly": limit,
                    "X-HubSpot-RateLimit-Secondly-Remaining": "0",
                },
                **extra,
            )
        status, headers, body = self._route(req)
        return status, {**self._limits(99), **headers}, body

    def _over_search_rate(self) -> bool:
        """Whether this search request exceeds ``search_per_second`` (sliding second)."""
        if self.search_per_second is None:
            return False
        now = time.monotonic()
        while self._searches and now - self._searches[0] >= 1.0:
            self._searches.popleft()
        if len(self._searches) >= self.search_per_second:
            return True
        self._searches.append(now)
        return False

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
            obj = self._new({**props, "email": email} if email else props)
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
                obj.modified_ms = self._now_ms()
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
                    obj = self._new({"email": email})
                    self.contacts[obj.id] = obj
                obj.properties.update(item.get("properties") or {})
                obj.properties["email"] = email
                obj.modified_ms = self._now_ms()
                results.append(obj.out(new=new))
            return _json(200, {"status": "COMPLETE", "results": results})
        if path == "/crm/v3/objects/contacts/search" and method == "POST":
            return self._search(req.body)
        if path == "/crm/v3/objects/deals" and method == "POST":
            props = self._props(req)
            if props is None or "dealname" not in props:
                return self._error(
                    400, "VALIDATION_ERROR", "Property values were not valid: dealname required"
                )
            obj = self._new(props)
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

    def _search(self, body: Any) -> Reply:
        """``POST /crm/v3/objects/contacts/search`` (module doc)."""
        if not isinstance(body, dict):
            return self._error(400, "VALIDATION_ERROR", "Invalid input JSON")
        limit, after = body.get("limit", 10), str(body.get("after") or "0")
        if not isinstance(limit, int) or not 1 <= limit <= 200 or not after.isdigit():
            return self._error(400, "VALIDATION_ERROR", "limit must be 1 to 200, after an offset")
        if int(after) >= self.search_cap:
            return self._error(
                400,
                "VALIDATION_ERROR",
                f"Paging past {self.search_cap} results is not supported for search",
            )
        groups = body.get("filterGroups") or []
        try:
            found = [
                obj
                for obj in self.contacts.values()
                if not groups or any(all(_matches(obj, f) for f in g["filters"]) for g in groups)
            ]
        except (KeyError, TypeError, ValueError) as err:
            return self._error(400, "VALIDATION_ERROR", f"invalid filter: {err}")
        sorts = body.get("sorts") or []
        if sorts:  # ties in id order, so that pages are stable
            first = sorts[0]
            name = str(first.get("propertyName") if isinstance(first, dict) else first)
            descending = isinstance(first, dict) and first.get("direction") == "DESCENDING"
            if name.startswith("-"):
                name, descending = name[1:], True
            found.sort(key=lambda obj: (*_sort_key(obj, name), int(obj.id)), reverse=descending)
        else:
            found.sort(key=lambda obj: int(obj.id))
        wanted = body.get("properties") or list(DEFAULT_SEARCH_PROPERTIES)
        start = int(after)
        page = found[: self.search_cap][start : start + limit]
        out: dict[str, Any] = {
            "total": len(found),
            "results": [
                {**obj.out(), "properties": {k: obj.value(k) for k in wanted}} for obj in page
            ],
        }
        if start + limit < len(found):
            out["paging"] = {"next": {"after": str(start + limit)}}
        if self.after_search is not None:
            self.after_search(self)
        return _json(200, out)

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


def _comparable(name: str, value: Any) -> Any:
    """``value`` of property ``name`` as search compares it: milliseconds for date-times,
    a number for numeric text, else lower-cased text."""
    if name in DATETIME_PROPERTIES:
        return _to_ms(value)
    text = str(value if value is not None else "")
    try:
        return float(text)
    except ValueError:
        return text.lower()


def _sort_key(obj: _Object, name: str) -> tuple[int, Any]:
    value = obj.comparable(name)
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def _matches(obj: _Object, flt: dict[str, Any]) -> bool:
    """Whether ``obj`` passes one search filter (raises ``ValueError`` for an unknown
    operator)."""
    name, op = flt["propertyName"], flt["operator"]
    have = obj.comparable(name)  # "" when the contact has no value
    if op == "HAS_PROPERTY":
        return have not in (None, "")
    if op == "NOT_HAS_PROPERTY":
        return have in (None, "")
    if op in ("IN", "NOT_IN"):
        values = {_comparable(name, v) for v in flt.get("values", [])}
        return (have in values) == (op == "IN")
    if op == "CONTAINS_TOKEN":
        return str(flt.get("value", "")).lower() in str(obj.value(name) or "").lower().split()
    if have in (None, ""):
        return op == "NEQ"
    want = _comparable(name, flt.get("value"))
    if op == "BETWEEN":
        return bool(want <= have <= _comparable(name, flt.get("highValue")))
    check = _COMPARISONS.get(op)
    if check is None:
        raise ValueError(f"unknown operator {op!r}")
    try:
        return check(have, want)
    except TypeError:  # a number against text
        return check(str(have), str(want))


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "EQ": operator.eq,
    "NEQ": operator.ne,
    "GT": operator.gt,
    "GTE": operator.ge,
    "LT": operator.lt,
    "LTE": operator.le,
}


Factory = Callable[[], LocalApi]
