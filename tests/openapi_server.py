"""A local API that answers what a test scripts and records every request (the stand-in
for a vendor's API in the OpenAPI connector tests), and the committed documents."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.local_http import LocalHTTPServer

DOCUMENTS = Path(__file__).parent / "fixtures" / "openapi"


def document_bytes(name: str) -> bytes:
    """The committed document ``name`` (``github``, ``stripe``, ...), decompressed."""
    return gzip.decompress((DOCUMENTS / f"{name}.json.gz").read_bytes())


def document(name: str) -> dict[str, Any]:
    """The committed document ``name`` parsed."""
    result: dict[str, Any] = json.loads(document_bytes(name))
    return result


@dataclass
class Call:
    """One request the API received."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes

    def form(self) -> list[tuple[str, str]]:
        """The body as ``application/x-www-form-urlencoded`` pairs."""
        return parse_qsl(self.body.decode(), keep_blank_values=True)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


Answer = tuple[int, Any, dict[str, str]]


@dataclass
class ScriptedApi:
    """Serves on 127.0.0.1; ``answer(call, url) -> (status, body, headers)``: the body
    is sent as JSON, or as it is when it is ``bytes``."""

    answer: Callable[[Call, str], Answer] = lambda call, url: (200, {}, {})
    calls: list[Call] = field(default_factory=list)
    server: LocalHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> ScriptedApi:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                parts = urlsplit(self.path)
                call = Call(
                    self.command,
                    parts.path,
                    parse_qsl(parts.query, keep_blank_values=True),
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                api.calls.append(call)
                status, body, headers = api.answer(call, api.url)
                payload = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
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
