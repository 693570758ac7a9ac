"""A receiver of outgoing events for tests: a local HTTP server that verifies every
request's Standard Webhooks signature with the ``standardwebhooks`` library, records what
it accepted, and can be taken down (connections refused) and brought back on its port."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Received:
    """One request: its ``webhook-id``, the verified payload, the status answered."""

    webhook_id: str
    payload: Any
    status: int


@dataclass
class EventReceiver:
    """Serves on 127.0.0.1:``port`` while up; answers ``status`` to a request whose
    signature verifies with ``secret`` (set it once the subscription exists), 401 to any
    other (recorded in ``rejected``)."""

    secret: str = ""
    status: int = 204
    received: list[Received] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    port: int = 0
    server: ThreadingHTTPServer | None = None

    def __post_init__(self) -> None:
        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/railyard"

    def start(self) -> EventReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    payload = Webhook(receiver.secret).verify(body, headers)
                    status = receiver.status
                    receiver.received.append(Received(headers["webhook-id"], payload, status))
                except WebhookVerificationError as exc:
                    status = 401
                    receiver.rejected.append(str(exc))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Down: the port refuses connections until :meth:`start`."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def acknowledged(self) -> list[Received]:
        """The requests answered with a 2xx."""
        return [r for r in self.received if 200 <= r.status < 300]

    def types_by_run(self) -> dict[str, list[str]]:
        """Acknowledged run event types per run, in arrival order."""
        out: dict[str, list[str]] = {}
        for r in self.acknowledged():
            run_id = r.payload["data"].get("run_id")
            if run_id:
                out.setdefault(run_id, []).append(r.payload["type"])
        return out

    def dump(self) -> str:
        return json.dumps([r.payload for r in self.received], indent=1)[:4000]
