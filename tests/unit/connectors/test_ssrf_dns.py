"""SSRF: DNS names resolving to blocked ranges are refused; the allowlist comes from settings."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import pytest

from backend.runtime import make_context_factory
from backend.settings import load_settings
from connectors import sdk
from connectors.builtin.http import http_request
from connectors.host import outbound

FAKE_DNS = {
    "metadata.attacker.example": "169.254.169.254",
    "intranet.attacker.example": "10.1.2.3",
    "v6.attacker.example": "::1",
    "mapped.attacker.example": "::ffff:127.0.0.1",
}


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    # the class of the loops the tests run on, without needing a current loop (a test
    # before this one may have left the main thread with none)
    probe = asyncio.get_event_loop_policy().new_event_loop()
    loop_type = type(probe)
    probe.close()
    original = loop_type.getaddrinfo

    async def getaddrinfo(self: Any, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in FAKE_DNS:
            address = FAKE_DNS[host]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, port))]
        return await original(self, host, port, *args, **kwargs)

    monkeypatch.setattr(loop_type, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize("host", sorted(FAKE_DNS))
async def test_names_resolving_to_blocked_ranges_are_refused(fake_dns: None, host: str) -> None:
    async with outbound.make_http_client(sdk.SsrfPolicy()) as client:
        with pytest.raises(sdk.NonRetryableError) as err:
            await client.get(f"http://{host}/")
    assert err.value.kind == "ssrf_blocked"
    assert host in err.value.message
    assert ipaddress.ip_address(err.value.details["address"]) == ipaddress.ip_address(
        FAKE_DNS[host]
    )


def _context(environ: dict[str, str]) -> Any:
    settings = load_settings(environ=environ)
    factory = make_context_factory(settings)
    info = sdk.ActionInfo(
        run_id="r",
        workflow_id="w",
        step_id="s",
        attempt=1,
        idempotency_key="k",
        node_type="http.request",
    )
    return factory(info, None, lambda: False)


async def test_allowlist_from_settings_reaches_local_server(local_server: str) -> None:
    blocked = _context({})
    with pytest.raises(sdk.NonRetryableError) as err:
        await http_request.run({"url": f"{local_server}/text"}, None, blocked)
    assert err.value.kind == "ssrf_blocked"
    allowed = _context({"RAILYARD_HTTP_ALLOWLIST": "127.0.0.1, 192.168.0.0/16"})
    out = await http_request.run({"url": f"{local_server}/text"}, None, allowed)
    assert out["body"] == "hello"
    again = _context({"RAILYARD_HTTP_ALLOWLIST": "127.0.0.1"})
    with pytest.raises(sdk.NonRetryableError):
        await http_request.run({"url": "http://169.254.169.254/latest/"}, None, again)


async def test_non_http_connectors_check_the_settings_policy_too() -> None:
    """email.send dials SMTP itself through ``current_context().ssrf``: the same policy."""
    strict = _context({})
    with pytest.raises(sdk.NonRetryableError) as err:
        await strict.ssrf.resolve_and_check("127.0.0.1", 25)
    assert err.value.kind == "ssrf_blocked"
    allowed = _context({"RAILYARD_HTTP_ALLOWLIST": "127.0.0.1"})
    assert [str(a) for a in await allowed.ssrf.resolve_and_check("127.0.0.1", 25)] == ["127.0.0.1"]
    private = _context({"RAILYARD_HTTP_ALLOW_PRIVATE": "1"})
    assert await private.ssrf.resolve_and_check("10.1.2.3", 25)
