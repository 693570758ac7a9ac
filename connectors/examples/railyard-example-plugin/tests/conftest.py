import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class ExampleApi(BaseHTTPRequestHandler):
    """GET /items/<id> with the right X-API-Key answers {"id": <id>}, else 401."""

    def do_GET(self) -> None:
        ok = self.headers.get("X-API-Key") == "test-key" and self.path.startswith("/items/")
        body = json.dumps({"id": self.path.rsplit("/", 1)[1]} if ok else {"error": "no"})
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def example_api_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ExampleApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
