"""Finding 8: the probe port of worker, scheduler and events processes listens on loopback
by default, and serves /metrics to another host only with the metrics token.

It used to listen on 0.0.0.0 and answer /metrics to anyone when no token was set. The
machine's own non-loopback address stands in for "another host".
"""

from __future__ import annotations

import socket

import httpx
import pytest

from backend.cli import _start_probes
from backend.workers.health import ProbeServer

pytestmark = pytest.mark.integration


def _outward_address() -> str:
    """This host's address on its default route (no packet is sent), or skip."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
    except OSError:
        pytest.skip("no non-loopback IPv4 address on this machine")
    finally:
        probe.close()
    if address.startswith("127."):
        pytest.skip("no non-loopback IPv4 address on this machine")
    return address


async def _ready() -> dict[str, str]:
    return {"database": "ok", "redis": "ok"}


async def test_probe_port_defaults_to_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAILYARD_HEALTH_HOST", raising=False)
    outward = _outward_address()
    server = await _start_probes(0, lambda: None)
    try:
        assert server._server.sockets[0].getsockname()[0] == "127.0.0.1"
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(trust_env=False) as c:
                await c.get(f"http://{outward}:{server.port}/health/live")
        async with httpx.AsyncClient(trust_env=False) as c:
            assert (await c.get(f"http://127.0.0.1:{server.port}/health/live")).status_code == 200
    finally:
        await server.close()


async def test_metrics_need_the_token_from_another_host() -> None:
    """Bound to every interface (as an operator may): without a token set, /metrics only
    for this host; with one, only for requests sending it."""
    outward = _outward_address()
    open_server = ProbeServer(_ready, host="0.0.0.0", port=0)
    guarded = ProbeServer(_ready, host="0.0.0.0", port=0, metrics_token="m-token-1234")
    await open_server.start()
    await guarded.start()
    bearer = {"Authorization": "Bearer m-token-1234"}
    try:
        async with httpx.AsyncClient(trust_env=False) as c:
            remote = await c.get(f"http://{outward}:{open_server.port}/metrics")
            assert remote.status_code == 403 and "RAILYARD_METRICS_TOKEN" in remote.text
            assert "railyard" not in remote.text.replace("RAILYARD_METRICS_TOKEN", "")
            assert (await c.get(f"http://{outward}:{open_server.port}/health/live")).is_success
            local = await c.get(f"http://127.0.0.1:{open_server.port}/metrics")
            assert local.status_code == 200
            assert (await c.get(f"http://{outward}:{guarded.port}/metrics")).status_code == 401
            r = await c.get(f"http://{outward}:{guarded.port}/metrics", headers=bearer)
            assert r.status_code == 200
            assert (await c.get(f"http://127.0.0.1:{guarded.port}/metrics")).status_code == 401
    finally:
        await open_server.close()
        await guarded.close()
