"""One SSRF-guarded keep-alive pool shared by many clients (connectors/sdk/ssrf.py;
backend/runtime.py hands one per Runtime to every attempt's client).

The local HTTP/1.1 server keeps connections alive and counts the TCP connections it
accepted, so connection reuse (and its absence) is observed on the server side.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import pytest_asyncio

from backend.runtime import make_context_factory
from backend.settings import load_settings
from connectors import sdk
from connectors.host import outbound

OPEN = sdk.SsrfPolicy(allow_private=True)  # the test server is on loopback
STRICT = sdk.SsrfPolicy()  # public addresses only


class _CountingServer(ThreadingHTTPServer):
    daemon_threads = True
    accepted = 0

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.accepted += 1  # once per accepted TCP connection
        return True


class _KeepAlive(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps({"cookie": self.headers.get("Cookie")}).encode()
        self.send_response(200)
        if self.path == "/set-cookie":
            self.send_header("Set-Cookie", "attempt=first; Path=/")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[_CountingServer]:
    """A keep-alive HTTP/1.1 server on 127.0.0.1 counting accepted connections."""
    srv = _CountingServer(("127.0.0.1", 0), _KeepAlive)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _url(srv: _CountingServer, path: str = "/") -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


@pytest_asyncio.fixture
async def pool() -> AsyncIterator[httpx.AsyncHTTPTransport]:
    p = outbound.guarded_connection_pool(OPEN)
    try:
        yield p
    finally:
        await p.aclose()


@pytest_asyncio.fixture
async def two_clients(
    pool: httpx.AsyncHTTPTransport,
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """Two clients (two attempts) sharing ``pool``."""
    async with (
        outbound.make_http_client(OPEN, pool=pool) as first,
        outbound.make_http_client(OPEN, pool=pool) as second,
    ):
        yield first, second


async def test_clients_sharing_a_pool_reuse_one_connection(
    server: _CountingServer, two_clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    first, second = two_clients
    assert (await first.get(_url(server))).status_code == 200
    assert (await second.get(_url(server))).status_code == 200
    assert (await first.get(_url(server))).status_code == 200
    assert server.accepted == 1


async def test_clients_without_a_shared_pool_each_connect(server: _CountingServer) -> None:
    # the counter sees separate connections (the test above is not vacuous)
    for _ in range(2):
        async with outbound.make_http_client(OPEN) as client:
            assert (await client.get(_url(server))).status_code == 200
    assert server.accepted == 2


async def test_closing_a_client_leaves_the_shared_pool_open(
    server: _CountingServer, pool: httpx.AsyncHTTPTransport
) -> None:
    first = outbound.make_http_client(OPEN, pool=pool)
    assert (await first.get(_url(server))).status_code == 200
    await first.aclose()
    async with outbound.make_http_client(OPEN, pool=pool) as later:
        assert (await later.get(_url(server))).status_code == 200
    # the kept-alive connection survived the first client's close and served the later one
    assert server.accepted == 1


async def test_shared_pool_checks_the_address_at_connect_time(server: _CountingServer) -> None:
    strict_pool = outbound.guarded_connection_pool(STRICT)
    try:
        # the client's own up-front check allows loopback; the pool's dial must not
        async with outbound.make_http_client(OPEN, pool=strict_pool) as client:
            with pytest.raises(sdk.NonRetryableError) as info:
                await client.get(_url(server))
        assert info.value.kind == "ssrf_blocked"
        assert info.value.details["reason"] == "loopback"
        # and straight through the pool, with no client in front of it
        with pytest.raises(sdk.NonRetryableError) as direct:
            await strict_pool.handle_async_request(httpx.Request("GET", _url(server)))
        assert direct.value.kind == "ssrf_blocked"
    finally:
        await strict_pool.aclose()
    assert server.accepted == 0


async def test_client_checks_up_front_even_over_a_permissive_pool(
    server: _CountingServer, pool: httpx.AsyncHTTPTransport
) -> None:
    async with outbound.make_http_client(STRICT, pool=pool) as client:
        with pytest.raises(sdk.NonRetryableError) as info:
            await client.get(_url(server))
    assert info.value.kind == "ssrf_blocked"
    assert server.accepted == 0


async def test_cookies_do_not_leak_between_clients_of_one_pool(
    server: _CountingServer, two_clients: tuple[httpx.AsyncClient, httpx.AsyncClient]
) -> None:
    first, second = two_clients
    await first.get(_url(server, "/set-cookie"))
    # the first client keeps its cookie (so the check below can fail)...
    assert (await first.get(_url(server))).json() == {"cookie": "attempt=first"}
    # ...the other attempt's client, on the very same connection, does not send it
    assert (await second.get(_url(server))).json() == {"cookie": None}
    assert server.accepted == 1


async def test_attempt_contexts_share_the_runtime_pool(
    server: _CountingServer, pool: httpx.AsyncHTTPTransport
) -> None:
    settings = load_settings(environ={}, http_allow_private=True)
    factory = make_context_factory(settings, http_pool=pool)
    for attempt in (1, 2):
        info = sdk.ActionInfo(
            run_id="r",
            workflow_id="w",
            step_id="s",
            attempt=attempt,
            idempotency_key="r:s",
            node_type="http.request",
        )
        context = factory(info, None, lambda: False)
        assert (await context.get_http_client().get(_url(server))).status_code == 200
        await context.aclose()  # as the engine does when the attempt ends
    assert server.accepted == 1
