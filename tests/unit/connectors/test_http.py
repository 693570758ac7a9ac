from __future__ import annotations

import pytest

from connectors import sdk
from connectors.builtin.http import connector, http_request
from connectors.testing import ActionTestEnvironment


def test_connector_exposes_http_request() -> None:
    assert connector.name == "http"
    assert connector.get("http.request") is http_request
    schema = http_request.config_json_schema()
    assert schema["required"] == ["url"]
    assert "$defs" not in schema
    assert schema["properties"]["method"]["enum"] == sorted(
        ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    )
    assert http_request.expression_fields == ("url", "headers", "query", "body")


async def test_get_with_query_lists(local_server: str) -> None:
    env = ActionTestEnvironment()
    out = await env.run(
        http_request,
        {"url": f"{local_server}/echo", "query": {"tag": ["a", "b"], "q": "x y"}},
        None,
    )
    assert out["status"] == 200
    assert out["headers"]["x-extra"] == "yes"
    assert out["headers"]["content-type"] == "application/json"
    body = out["body"]
    assert body["method"] == "GET"
    assert body["query"] == {"tag": ["a", "b"], "q": ["x y"]}
    assert body["headers"]["user-agent"].startswith("Railyard/")
    assert "idempotency-key" not in body["headers"]


async def test_post_json_sends_idempotency_key(local_server: str) -> None:
    env = ActionTestEnvironment(run_id="r1", step_id="s1", idempotency_key="r1:s1:0")
    out = await env.run(
        http_request,
        {"method": "POST", "url": f"{local_server}/echo", "body": {"n": 1, "items": [1, 2]}},
        None,
    )
    body = out["body"]
    assert body["method"] == "POST"
    assert body["body"] == {"n": 1, "items": [1, 2]}
    assert body["headers"]["idempotency-key"] == "r1:s1:0"
    assert body["headers"]["content-type"] == "application/json"


async def test_user_idempotency_key_wins(local_server: str) -> None:
    env = ActionTestEnvironment()
    out = await env.run(
        http_request,
        {"method": "PUT", "url": f"{local_server}/echo", "headers": {"idempotency-key": "mine"}},
        None,
    )
    assert out["body"]["headers"]["idempotency-key"] == "mine"


async def test_text_body(local_server: str) -> None:
    out = await ActionTestEnvironment().run(http_request, {"url": f"{local_server}/text"}, None)
    assert out == {
        "status": 200,
        "headers": out["headers"],
        "body": "hello",
        "url": f"{local_server}/text",
    }


async def test_404_is_not_retryable(local_server: str) -> None:
    with pytest.raises(sdk.NonRetryableError) as info:
        await ActionTestEnvironment().run(http_request, {"url": f"{local_server}/missing"}, None)
    assert info.value.kind == "http_404"
    assert info.value.retryable is False
    assert "404" in info.value.message
    assert "no such thing" in info.value.message


async def test_404_without_fail_on_error_status(local_server: str) -> None:
    out = await ActionTestEnvironment().run(
        http_request, {"url": f"{local_server}/missing", "fail_on_error_status": False}, None
    )
    assert out["status"] == 404
    assert out["body"] == {"error": "no such thing"}


async def test_503_with_retry_after_is_retryable(local_server: str) -> None:
    with pytest.raises(sdk.ActionError) as info:
        await ActionTestEnvironment().run(http_request, {"url": f"{local_server}/busy"}, None)
    assert info.value.retryable is True
    assert info.value.kind == "http_503"
    assert info.value.retry_after == 7.0


async def test_timeout_is_retryable(local_server: str) -> None:
    with pytest.raises(sdk.ActionError) as info:
        await ActionTestEnvironment().run(
            http_request, {"url": f"{local_server}/slow", "request_timeout": 0.2}, None
        )
    assert info.value.kind == "http_timeout"
    assert info.value.retryable is True
    assert "/slow" in info.value.message


async def test_connection_refused_is_retryable_transport_error() -> None:
    with pytest.raises(sdk.ActionError) as info:
        await ActionTestEnvironment().run(http_request, {"url": "http://127.0.0.1:9/x"}, None)
    assert info.value.kind == "http_transport"
    assert info.value.retryable is True
    assert "127.0.0.1:9" in info.value.message


async def test_ssrf_blocked_by_default_policy(local_server: str) -> None:
    env = ActionTestEnvironment(ssrf=sdk.SsrfPolicy())
    with pytest.raises(sdk.NonRetryableError) as info:
        await env.run(http_request, {"url": f"{local_server}/echo"}, None)
    assert info.value.kind == "ssrf_blocked"


async def test_invalid_config_is_config_error() -> None:
    with pytest.raises(sdk.ConfigError) as info:
        await ActionTestEnvironment().run(http_request, {"method": "FETCH", "url": "x"}, None)
    assert info.value.retryable is False
    assert info.value.kind == "config"
    with pytest.raises(sdk.ConfigError):
        await ActionTestEnvironment().run(http_request, {}, None)
