from __future__ import annotations

import ipaddress

import httpx
import pytest

from connectors import sdk
from connectors.host import outbound
from connectors.host.outbound import SsrfGuardTransport


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://10.0.0.1/",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:8080/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://localhost/",
    ],
)
async def test_default_policy_blocks_non_public(url: str) -> None:
    async with outbound.make_http_client(sdk.SsrfPolicy()) as client:
        with pytest.raises(sdk.NonRetryableError) as info:
            await client.get(url)
    err = info.value
    assert err.kind == "ssrf_blocked"
    assert err.retryable is False
    host = httpx.URL(url).host
    assert host in err.message
    assert "refusing to connect" in err.message


async def test_localhost_message_names_host_and_address() -> None:
    async with outbound.make_http_client(sdk.SsrfPolicy()) as client:
        with pytest.raises(sdk.NonRetryableError) as info:
            await client.get("http://localhost:1/")
    assert "localhost (" in info.value.message
    assert info.value.details["host"] == "localhost"
    assert ipaddress.ip_address(info.value.details["address"]).is_loopback


async def test_only_http_schemes() -> None:
    transport = SsrfGuardTransport(sdk.SsrfPolicy(allow_private=True))
    with pytest.raises(sdk.NonRetryableError) as info:
        await transport.handle_async_request(httpx.Request("GET", "ftp://example.com/x"))
    assert info.value.kind == "ssrf_blocked"
    await transport.aclose()


@pytest.mark.parametrize("entry", ["127.0.0.1", "127.0.0.0/8", "localhost"])
async def test_allowlist_admits(local_server: str, entry: str) -> None:
    url = f"{local_server}/text"
    if entry == "localhost":
        url = url.replace("127.0.0.1", "localhost")
    async with outbound.make_http_client(sdk.SsrfPolicy(allowlist=(entry,))) as client:
        response = await client.get(url)
    assert response.status_code == 200
    assert response.text == "hello"


async def test_allowlist_does_not_open_other_addresses() -> None:
    async with outbound.make_http_client(sdk.SsrfPolicy(allowlist=("127.0.0.1",))) as client:
        with pytest.raises(sdk.NonRetryableError):
            await client.get("http://10.0.0.1/")


def test_policy_address_rules() -> None:
    policy = sdk.SsrfPolicy(allowlist=("10.1.0.0/16", "*.corp.example"))
    assert policy.address_allowed(ipaddress.ip_address("93.184.216.34"))
    assert policy.address_allowed(ipaddress.ip_address("2606:4700::1111"))
    assert policy.address_allowed(ipaddress.ip_address("10.1.2.3"))
    assert not policy.address_allowed(ipaddress.ip_address("10.2.0.1"))
    assert not policy.address_allowed(ipaddress.ip_address("100.64.0.1"))
    assert policy.host_allowlisted("api.corp.example")
    assert not policy.host_allowlisted("corp.example.evil.com")
    assert sdk.SsrfPolicy(allow_private=True).address_allowed(ipaddress.ip_address("127.0.0.1"))


async def test_response_size_cap(local_server: str) -> None:
    policy = sdk.SsrfPolicy(allow_private=True)
    async with outbound.make_http_client(policy, max_response_bytes=1000) as client:
        with pytest.raises(sdk.NonRetryableError) as info:
            await client.get(f"{local_server}/big")
        assert info.value.kind == "response_too_large"
        ok = await client.get(f"{local_server}/text")
        assert ok.text == "hello"


async def test_client_defaults() -> None:
    async with outbound.make_http_client() as client:
        assert client.timeout.read == 30.0
        assert client.headers["user-agent"].startswith("Railyard/")
        assert client.trust_env is False


def test_connect_time_guard_installed() -> None:
    # the check is repeated when httpcore dials (DNS rebinding); make sure the hook is in
    transport = SsrfGuardTransport(sdk.SsrfPolicy())
    pool = transport._inner._pool  # type: ignore[attr-defined]
    assert type(pool._network_backend).__name__ == "_GuardedNetworkBackend"
