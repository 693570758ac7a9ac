"""A local server for the polling triggers' tests: a JSON item list and RSS/Atom feeds.

- ``GET /items``: ``{"data": {"items": [...]}}`` of :attr:`ItemsAndFeeds.items` (newest
  first, as most APIs list them);
- ``GET /feed.rss`` and ``GET /feed.atom``: the feed documents in :attr:`feeds`, with an
  ``ETag`` (a hash of the document) and ``Last-Modified``; a request whose
  ``If-None-Match`` matches is answered 304 without a body (RFC 9110 §13.1.2);
- ``fail_next``: the next requests get these ``(status, headers)`` answers first, e.g.
  ``[(429, {"Retry-After": "7"})]``.

Every request is recorded in ``requests`` (method, path, lower-cased headers).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.fakes.apis import LocalApi, Recorded, Reply

LAST_MODIFIED = "Mon, 06 Jan 2025 10:00:00 GMT"


class ItemsAndFeeds(LocalApi):
    """See the module doc."""

    def __init__(self) -> None:
        super().__init__()
        self.items: list[dict[str, Any]] = []
        self.feeds: dict[str, tuple[str, str]] = {}  # path -> (content type, document)
        self.fail_next: list[tuple[int, dict[str, str]]] = []

    def reset(self) -> None:
        """No items, feeds, failures or recorded requests (a server shared by tests)."""
        with self.lock:
            self.items, self.feeds, self.fail_next = [], {}, []
            self.requests.clear()

    def route(self, req: Recorded) -> Reply:
        if self.fail_next:
            status, headers = self.fail_next.pop(0)
            body = json.dumps({"error": f"status {status}"}).encode()
            return status, dict(headers), body
        path = req.path.split("?", 1)[0]
        if path == "/items":
            return 200, {}, json.dumps({"data": {"items": self.items}}).encode()
        if path == "/not-json":
            return 200, {"Content-Type": "text/html"}, b"<html>maintenance</html>"
        if path in self.feeds:
            content_type, document = self.feeds[path]
            raw = document.encode()
            etag = '"' + hashlib.sha256(raw).hexdigest()[:16] + '"'
            headers = {"ETag": etag, "Last-Modified": LAST_MODIFIED}
            if req.headers.get("if-none-match") == etag:
                return 304, headers, b""
            return 200, {**headers, "Content-Type": content_type}, raw
        return 404, {}, b'{"error": "not found"}'
