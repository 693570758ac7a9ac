"""A local HTTP server emulating the parts of Elasticsearch's REST API the indexer uses,
as documented (Elasticsearch 9 reference): cluster info, index templates, create/exists
index, ``_bulk`` (NDJSON; per-item results, ``errors`` flag), ``_doc`` get, ``_count``,
``_refresh`` and ``_delete_by_query`` with a ``term`` query. Every 2xx answer carries
``X-Elastic-Product: Elasticsearch`` as the official client requires.

Documents are checked against the strict mapping of the template that matched the index
(an unknown field is refused per item with ``strict_dynamic_mapping_exception``, as
Elasticsearch does). ``stop()`` and ``start()`` again on the same port emulate an outage;
``overloaded`` makes ``_bulk`` answer 429 (``es_rejected_execution_exception``).
``GET /_emulator/stored_at/<index>`` (not Elasticsearch's) answers when each document was
first stored (Unix time), for measuring indexing lag from another process.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.local_http import LocalHTTPServer

MEDIA = "application/vnd.elasticsearch+json;compatible-with=9"


class ElasticsearchLike:
    """The emulator; ``indices[name][id]`` holds each stored document source."""

    def __init__(self) -> None:
        self.templates: dict[str, dict[str, Any]] = {}
        self.indices: dict[str, dict[str, dict[str, Any]]] = {}
        self.mappings: dict[str, dict[str, Any]] = {}
        self.bulk_requests = 0
        self.overloaded = False
        self.lock = threading.Lock()
        self.port = 0
        self.server: LocalHTTPServer | None = None
        self.connections: set[socket.socket] = set()
        self.stored_at: dict[str, dict[str, float]] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ElasticsearchLike:
        """Listen (on the previous port after a :meth:`stop`)."""
        emulator = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with emulator.lock:
                    emulator.connections.add(self.connection)

            def finish(self) -> None:
                with emulator.lock:
                    emulator.connections.discard(self.connection)
                super().finish()

            def handle_one(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with emulator.lock:
                    status, body = emulator.route(self.command, self.path, raw)
                payload = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Type", MEDIA)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_one

        server = LocalHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening and drop open keep-alive connections (connections are refused
        until :meth:`start`)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        with self.lock:
            for conn in list(self.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self.connections.clear()

    def docs(self, index: str) -> dict[str, dict[str, Any]]:
        """The documents of ``index`` by id (a copy)."""
        with self.lock:
            return dict(self.indices.get(index, {}))

    # ---- routing -------------------------------------------------------------------

    def route(self, method: str, target: str, raw: bytes) -> tuple[int, Any]:
        path = urlsplit(target).path.strip("/")
        parts = path.split("/") if path else []
        if not parts:
            return 200, {
                "name": "emulator",
                "cluster_name": "railyard-test",
                "version": {"number": "9.0.0", "build_flavor": "default"},
                "tagline": "You Know, for Search",
            }
        if parts[0] == "_emulator" and parts[1] == "stored_at":
            return 200, self.stored_at.get(parts[2], {})
        if parts[0] == "_index_template" and method == "PUT":
            self.templates[parts[1]] = json.loads(raw)
            return 200, {"acknowledged": True}
        if parts[-1] == "_bulk":
            return self._bulk(raw)
        index = parts[0]
        if len(parts) == 1:
            if method == "HEAD":
                return (200 if index in self.indices else 404), None
            if method == "PUT":
                return self._create(index)
            if method == "DELETE":
                self.indices.pop(index, None)
                return 200, {"acknowledged": True}
        missing = [name for name in index.split(",") if name not in self.indices]
        if missing:
            return 404, _error("index_not_found_exception", f"no such index [{missing[0]}]", 404)
        action = parts[1]
        if action == "_refresh":
            return 200, {"_shards": {"total": 1, "successful": 1, "failed": 0}}
        if action == "_count":
            return 200, {"count": len(self.indices[index])}
        if action == "_doc" and method == "GET":
            doc = self.indices[index].get(parts[2])
            found = {"_index": index, "_id": parts[2], "found": doc is not None}
            return (200, {**found, "_source": doc}) if doc is not None else (404, found)
        if action == "_delete_by_query":
            (field, value), *_ = json.loads(raw)["query"]["term"].items()
            gone = [i for i, d in self.indices[index].items() if d.get(field) == value]
            for i in gone:
                del self.indices[index][i]
            return 200, {"deleted": len(gone), "failures": []}
        return 400, _error("illegal_argument_exception", f"unsupported: {method} {target}", 400)

    def _create(self, index: str) -> tuple[int, Any]:
        if index in self.indices:
            return 400, _error(
                "resource_already_exists_exception", f"index [{index}] already exists", 400
            )
        self.indices[index] = {}
        for template in sorted(self.templates.values(), key=lambda t: -t.get("priority", 0)):
            if any(fnmatch.fnmatch(index, p) for p in template["index_patterns"]):
                self.mappings[index] = template["template"]["mappings"]
                break
        return 200, {"acknowledged": True, "shards_acknowledged": True, "index": index}

    def _bulk(self, raw: bytes) -> tuple[int, Any]:
        self.bulk_requests += 1
        if self.overloaded:
            return 429, _error("es_rejected_execution_exception", "rejected execution", 429)
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        items: list[dict[str, Any]] = []
        i = 0
        while i < len(lines):
            ((action, meta),) = lines[i].items()
            index, doc_id = meta["_index"], str(meta["_id"])
            if action == "delete":
                existed = self.indices.get(index, {}).pop(doc_id, None) is not None
                status = 200 if existed else 404
                result = "deleted" if existed else "not_found"
                items.append(
                    {"delete": {"_index": index, "_id": doc_id, "status": status, "result": result}}
                )
                i += 1
                continue
            source = lines[i + 1]
            i += 2
            if index not in self.indices:
                self._create(index)
            problem = self._check(index, source)
            if problem:
                items.append(
                    {action: {"_index": index, "_id": doc_id, "status": 400, "error": problem}}
                )
                continue
            created = doc_id not in self.indices[index]
            self.indices[index][doc_id] = source
            self.stored_at.setdefault(index, {}).setdefault(doc_id, time.time())
            items.append(
                {
                    action: {
                        "_index": index,
                        "_id": doc_id,
                        "status": 201 if created else 200,
                        "result": "created" if created else "updated",
                    }
                }
            )
        errors = any(next(iter(it.values()))["status"] >= 300 for it in items if "index" in it)
        return 200, {"took": 1, "errors": errors, "items": items}

    def _check(self, index: str, source: dict[str, Any]) -> dict[str, Any] | None:
        mapping = self.mappings.get(index)
        if not mapping or mapping.get("dynamic") != "strict":
            return None
        unknown = [k for k in source if k not in mapping["properties"]]
        if unknown:
            return {
                "type": "strict_dynamic_mapping_exception",
                "reason": f"mapping set to strict, dynamic introduction of [{unknown[0]}]"
                " within [_doc] is not allowed",
            }
        return None


def _error(kind: str, reason: str, status: int) -> dict[str, Any]:
    return {
        "error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
        "status": status,
    }


if __name__ == "__main__":  # a separate process for benchmarks: prints its URL
    import sys

    emulator = ElasticsearchLike().start()
    print(emulator.url, flush=True)
    sys.stdin.read()  # until the parent closes stdin
    emulator.stop()
