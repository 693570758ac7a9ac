"""A real HTTP server on 127.0.0.1 (random port) for connector tests."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.fakes.apis import HubSpotLike
from tests.fakes.feeds import ItemsAndFeeds
from tests.local_http import LocalHTTPServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests)

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if parts.path == "/echo":
            payload = {
                "method": self.command,
                "path": parts.path,
                "query": parse_qs(parts.query),
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": json.loads(raw) if raw else None,
            }
            self._send(200, json.dumps(payload).encode(), "application/json", X_Extra="yes")
        elif parts.path == "/raw":
            payload = {
                "method": self.command,
                "content_type": self.headers.get("Content-Type", ""),
                "authorization": self.headers.get("Authorization", ""),
                "raw": raw.decode("utf-8", "replace"),
            }
            self._send(200, json.dumps(payload).encode(), "application/json")
        elif parts.path == "/redirect":
            query = parse_qs(parts.query)
            hops = int(query.get("n", ["1"])[0])
            status = int(query.get("status", ["302"])[0])
            target = (
                query["to"][0]
                if "to" in query
                else (f"/redirect?n={hops - 1}&status={status}" if hops > 1 else "/raw")
            )
            self._send(status, b"", "text/plain", Location=target)
        elif parts.path == "/pages":
            page = int(parse_qs(parts.query).get("page", ["1"])[0])
            body = {"page": page, "next": f"/pages?page={page + 1}" if page < 3 else None}
            link = f'</pages?page={page + 1}>; rel="next"' if page < 3 else ""
            extra = {"Link": link} if link else {}
            self._send(200, json.dumps(body).encode(), "application/json", **extra)
        elif parts.path == "/text":
            self._send(200, b"hello", "text/plain; charset=utf-8")
        elif parts.path == "/missing":
            self._send(404, b'{"error": "no such thing"}', "application/json")
        elif parts.path == "/busy":
            self._send(503, b"try later", "text/plain", Retry_After="7")
        elif parts.path == "/slow":
            time.sleep(1.0)
            self._send(200, b"late", "text/plain")
        elif parts.path == "/big":
            self._send(200, b"x" * 5000, "text/plain")
        else:
            self._send(500, b"unknown path", "text/plain")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle


@pytest.fixture(scope="session")
def local_server() -> Iterator[str]:
    """Base URL (``http://127.0.0.1:<port>``) of a threaded local HTTP server."""
    server = LocalHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def _items_and_feeds() -> Iterator[ItemsAndFeeds]:
    server = ItemsAndFeeds().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def feed_api(_items_and_feeds: ItemsAndFeeds) -> ItemsAndFeeds:
    """A local JSON-items and RSS/Atom server (tests/fakes/feeds.py) with nothing listed,
    recorded or failing."""
    _items_and_feeds.reset()
    return _items_and_feeds


@pytest.fixture
def crm() -> Iterator[HubSpotLike]:
    """A HubSpot-like CRM server (tests/fakes/apis.py), started for one test."""
    with HubSpotLike() as server:
        yield server
