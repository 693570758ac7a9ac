"""The connector SDK exports the author API only; the host builds contexts and clients."""

from __future__ import annotations

import httpx
import msgspec
import pytest

from connectors import sdk
from connectors.host.contexts import action_context
from connectors.host.outbound import SsrfGuardTransport


class NoConfig(msgspec.Struct):
    pass


HOST_PLUMBING = {
    "SsrfGuardTransport",
    "guarded_connection_pool",
    "make_http_client",
    "user_agent",
    "default_ssl_context",
}


def test_sdk_exports_no_host_plumbing() -> None:
    assert HOST_PLUMBING.isdisjoint(sdk.__all__)
    for name in HOST_PLUMBING:
        assert not hasattr(sdk, name), name


async def test_context_without_a_client_refuses_http() -> None:
    @sdk.action("demo.noclient", label="No client", config=NoConfig)
    async def uses_client(config: NoConfig, input: object) -> object:
        return sdk.http_client()

    info = sdk.ActionInfo("r", "w", "s", 1, "r:s", "demo.noclient")
    with pytest.raises(RuntimeError, match="no HTTP client"):
        await uses_client.run({}, None, sdk.ActionContext(info=info))


async def test_host_context_hands_out_a_guarded_client_and_closes_it() -> None:
    seen: list[httpx.AsyncClient] = []

    @sdk.action("demo.guarded", label="Guarded", config=NoConfig)
    async def grab(config: NoConfig, input: object) -> bool:
        client = sdk.http_client()
        seen.append(client)
        return isinstance(client._transport, SsrfGuardTransport)

    info = sdk.ActionInfo("r", "w", "s", 1, "r:s", "demo.guarded")
    context = action_context(info, ssrf=sdk.SsrfPolicy())
    assert context.ssrf == sdk.SsrfPolicy()
    assert await grab.run({}, None, context) is True
    assert seen[0].is_closed


async def test_host_context_blocks_private_addresses() -> None:
    @sdk.action("demo.fetch", label="Fetch", config=NoConfig)
    async def fetch(config: NoConfig, input: object) -> int:
        response = await sdk.http_client().get("http://127.0.0.1:9/")
        return response.status_code

    info = sdk.ActionInfo("r", "w", "s", 1, "r:s", "demo.fetch")
    with pytest.raises(sdk.NonRetryableError) as caught:
        await fetch.run({}, None, action_context(info, ssrf=sdk.SsrfPolicy()))
    assert caught.value.kind == "ssrf_blocked"
