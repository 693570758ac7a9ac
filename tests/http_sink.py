"""A local HTTP endpoint that records requests (stands in for a third-party API)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_http import LocalHTTPServer


@dataclass
class Recorded:
    """One request the sink received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


@dataclass
class HttpSink:
    """Serves on 127.0.0.1:<port>; answers ``status`` with a JSON body; records requests.

    ``handler(request, call number from 1) -> (status, JSON body)`` overrides ``status`` and
    ``response`` per request (the request is recorded first); ``delay`` seconds are slept
    before answering (a slow third-party API).
    """

    status: int = 200
    response: Any = field(default_factory=lambda: {"ok": True})
    requests: list[Recorded] = field(default_factory=list)
    server: LocalHTTPServer | None = None
    handler: Callable[[Recorded, int], tuple[int, Any]] | None = None
    delay: float = 0.0

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> HttpSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                recorded = Recorded(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                sink.requests.append(recorded)
                status, response = sink.status, sink.response
                if sink.handler is not None:
                    status, response = sink.handler(recorded, len(sink.requests))
                if sink.delay:
                    time.sleep(sink.delay)
                payload = json.dumps(response).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

            def log_message(self, *args: Any) -> None:
                pass

        self.server = LocalHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
