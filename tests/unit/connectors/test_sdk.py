from __future__ import annotations

import email.utils
import logging
import time
from typing import Annotated, Any, Literal

import httpx
import msgspec
import pytest

from connectors import sdk
from connectors.testing import ActionTestEnvironment


class Address(msgspec.Struct):
    """Where to send it."""

    street: str
    city: Annotated[str, msgspec.Meta(title="City", description="Town name")] = ""


class Config(msgspec.Struct):
    name: Annotated[
        str,
        msgspec.Meta(title="Name", description="Who", extra_json_schema={"x-widget": "text"}),
    ]
    mode: Literal["fast", "slow"] = "fast"
    address: Address | None = None
    addresses: list[Address] = []
    count: int = 1


class Output(msgspec.Struct):
    greeting: str
    attempt: int


@sdk.action(
    "demo.greet",
    label="Greet",
    config=Config,
    category="Demo",
    icon="smile",
    expression_fields=("name",),
    outputs=("out", "other"),
)
async def greet(config: Config, input: Any) -> Output:
    """Say hello."""
    info = sdk.info()
    sdk.heartbeat({"step": 1})
    sdk.logger().info("greeting %s", config.name)
    if sdk.is_cancelled():
        raise sdk.ActionError("cancelled", kind="cancelled", retryable=False)
    return Output(greeting=f"hello {config.name} ({info.step_id})", attempt=info.attempt)


def test_action_definition_fields() -> None:
    assert isinstance(greet, sdk.ActionDefinition)
    assert greet.type == "demo.greet"
    assert greet.label == "Greet"
    assert greet.category == "Demo"
    assert greet.icon == "smile"
    assert greet.description == "Say hello."
    assert greet.config_type is Config
    assert greet.output_type is Output
    assert greet.expression_fields == ("name",)
    assert greet.outputs == ("out", "other")


def test_config_schema_is_inlined() -> None:
    schema = greet.config_json_schema()
    text = msgspec.json.encode(schema).decode()
    assert "$ref" not in text
    assert "$defs" not in text
    assert schema["type"] == "object"
    assert schema["required"] == ["name"]
    name = schema["properties"]["name"]
    assert name["title"] == "Name"
    assert name["description"] == "Who"
    assert name["x-widget"] == "text"
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert schema["properties"]["mode"]["type"] == "string"
    address = schema["properties"]["address"]["anyOf"][0]
    assert address["type"] == "object"
    assert address["required"] == ["street"]
    assert address["properties"]["city"]["title"] == "City"
    assert schema["properties"]["addresses"]["items"]["properties"]["street"]["type"] == "string"
    # callers get a copy they may change
    schema["properties"].clear()
    assert greet.config_json_schema()["properties"]


class Node(msgspec.Struct):
    value: int
    children: list[Node] = []


def test_recursive_struct_schema_terminates() -> None:
    schema = sdk.config_json_schema(Node)
    assert schema["properties"]["value"] == {"type": "integer"}
    assert schema["properties"]["children"]["items"] == {"type": "object"}


def test_decorator_validation() -> None:
    with pytest.raises(ValueError, match="expression_fields"):
        sdk.action("x.y", label="X", config=Config, expression_fields=("nope",))
    with pytest.raises(TypeError):
        sdk.action("x.y", label="X", config=dict)
    with pytest.raises(TypeError, match="async"):
        sdk.action("x.y", label="X", config=Config)(lambda c, i: None)  # type: ignore[arg-type,return-value]


def test_connector_rejects_duplicates() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        sdk.Connector(name="demo", label="Demo", version="1", actions=[greet, greet])
    connector = sdk.Connector(name="demo", label="Demo", version="1", actions=[greet])
    assert connector.get("demo.greet") is greet
    assert connector.get("demo.other") is None


async def test_run_returns_builtins_and_records_heartbeats() -> None:
    env = ActionTestEnvironment(step_id="s7", attempt=3)
    out = await env.run(greet, {"name": "Ada"}, {"any": "input"})
    assert out == {"greeting": "hello Ada (s7)", "attempt": 3}
    assert env.heartbeats == [{"step": 1}]


async def test_cancellation_visible() -> None:
    env = ActionTestEnvironment()
    env.cancel()
    with pytest.raises(sdk.ActionError, match="cancelled"):
        await env.run(greet, {"name": "Ada"}, None)


async def test_config_error() -> None:
    with pytest.raises(sdk.ConfigError) as info:
        await ActionTestEnvironment().run(greet, {"name": 5}, None)
    assert info.value.retryable is False
    assert "demo.greet" in info.value.message
    assert "$.name" in info.value.message


def test_context_functions_outside_action() -> None:
    for fn in (sdk.info, sdk.is_cancelled, sdk.http_client, sdk.logger, sdk.heartbeat):
        with pytest.raises(RuntimeError, match="not running inside"):
            fn()


async def test_engine_context_with_async_heartbeat_and_shared_client() -> None:
    seen: list[Any] = []

    async def beat(details: Any) -> None:
        seen.append(details)

    @sdk.action("demo.ctx", label="Ctx", config=Config)
    async def ctx_action(config: Config, input: Any) -> dict[str, Any]:
        sdk.heartbeat("a")
        sdk.heartbeat("b")
        info = sdk.info()
        return {
            "key": info.idempotency_key,
            "node_type": info.node_type,
            "client_is_shared": sdk.http_client() is shared,
            "logger": sdk.logger().name,
            "input": input,
        }

    shared = httpx.AsyncClient()
    context = sdk.ActionContext(
        info=sdk.ActionInfo(
            run_id="r",
            workflow_id="w",
            step_id="s",
            attempt=2,
            idempotency_key="r:s:1",
            node_type="demo.ctx",
        ),
        heartbeat=beat,
        http_client=shared,
        logger=logging.getLogger("custom"),
    )
    out = await ctx_action.run({"name": "n"}, [1, 2], context)
    assert out == {
        "key": "r:s:1",
        "node_type": "demo.ctx",
        "client_is_shared": True,
        "logger": "custom",
        "input": [1, 2],
    }
    assert seen == ["a", "b"]
    assert not shared.is_closed  # a shared client is not closed by the SDK
    await shared.aclose()


async def test_factory_client_is_closed_after_run() -> None:
    created: list[httpx.AsyncClient] = []

    def factory() -> httpx.AsyncClient:
        created.append(httpx.AsyncClient())
        return created[-1]

    @sdk.action("demo.client", label="Client", config=Config)
    async def uses_client(config: Config, input: Any) -> bool:
        return sdk.http_client() is sdk.http_client()

    info = sdk.ActionInfo("r", "w", "s", 1, "k", "demo.client")
    context = sdk.ActionContext(info=info, http_client=factory)
    assert await uses_client.run({"name": "n"}, None, context) is True
    assert len(created) == 1
    assert created[0].is_closed


def _response(
    status: int, headers: dict[str, str] | None = None, body: bytes = b""
) -> httpx.Response:
    request = httpx.Request("GET", "https://api.example.com/things")
    return httpx.Response(status, headers=headers, content=body, request=request)


def test_raise_for_status_ok() -> None:
    sdk.raise_for_status(_response(200))
    sdk.raise_for_status(_response(304))


def test_raise_for_status_4xx() -> None:
    with pytest.raises(sdk.NonRetryableError) as info:
        sdk.raise_for_status(_response(422, body=b'{"error": "bad field"}' + b" pad" * 200))
    err = info.value
    assert err.kind == "http_422"
    assert err.retryable is False
    assert "422" in err.message
    assert "https://api.example.com/things" in err.message
    assert "bad field" in err.message
    assert len(err.message) < 400
    assert err.details["status"] == 422


def test_raise_for_status_5xx_retryable() -> None:
    with pytest.raises(sdk.ActionError) as info:
        sdk.raise_for_status(_response(502))
    assert info.value.retryable is True
    assert info.value.kind == "http_502"
    assert info.value.retry_after is None


def test_retry_after_seconds() -> None:
    with pytest.raises(sdk.ActionError) as info:
        sdk.raise_for_status(_response(429, {"Retry-After": "120"}))
    assert info.value.retryable is True
    assert info.value.kind == "http_429"
    assert info.value.retry_after == 120.0


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(time.time() + 60, usegmt=True)
    with pytest.raises(sdk.ActionError) as info:
        sdk.raise_for_status(_response(503, {"Retry-After": when}))
    assert info.value.retry_after is not None
    assert 55 <= info.value.retry_after <= 61


def test_parse_retry_after() -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert sdk.parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=now) == 30.0
    assert sdk.parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now=now) == 0.0
    assert sdk.parse_retry_after("0") == 0.0
    assert sdk.parse_retry_after(None) is None
    assert sdk.parse_retry_after("soon") is None
    assert sdk.parse_retry_after("-5") is None


def test_error_types() -> None:
    err = sdk.ActionError("boom", kind="x", retry_after=1.5, details={"a": 1})
    assert err.to_dict() == {
        "message": "boom",
        "kind": "x",
        "retryable": True,
        "retry_after": 1.5,
        "details": {"a": 1},
    }
    assert str(err) == "boom"
    nre = sdk.NonRetryableError("no", kind="bad")
    assert isinstance(nre, sdk.ActionError)
    assert nre.retryable is False and nre.kind == "bad"
    assert isinstance(sdk.ConfigError("c"), sdk.NonRetryableError)


# -- sdk.http_errors / sdk.redact_url ---------------------------------------------------


def _raising(exc: Exception) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return httpx.MockTransport(handler)


async def test_http_errors_maps_timeout_to_retryable_http_timeout() -> None:
    url = "https://api.example.test/items"
    client = httpx.AsyncClient(transport=_raising(httpx.ReadTimeout("slow")))
    with pytest.raises(sdk.ActionError) as info:
        with sdk.http_errors(url, method="GET", service="Acme", timeout=2.5):
            await client.get(url)
    err = info.value
    assert (err.kind, err.retryable) == ("http_timeout", True)
    assert err.message == f"Acme GET {url} timed out after 2.5 s (ReadTimeout)"
    assert err.details == {"url": url}


async def test_http_errors_maps_transport_errors_to_retryable_http_transport() -> None:
    url = "http://127.0.0.1:9/x"
    client = httpx.AsyncClient(transport=_raising(httpx.ConnectError("refused")))
    with pytest.raises(sdk.ActionError) as info:
        with sdk.http_errors(url, method="POST"):
            await client.post(url)
    err = info.value
    assert (err.kind, err.retryable) == ("http_transport", True)
    assert err.message == f"POST {url} failed: ConnectError: refused"


async def test_http_errors_refuses_urls_without_http_scheme() -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(sdk.NonRetryableError) as info:
            with sdk.http_errors("example.test/x"):
                await client.get("example.test/x")
    assert info.value.kind == "http_invalid_url"


async def test_http_errors_lets_other_errors_through() -> None:
    with pytest.raises(sdk.NonRetryableError) as info:
        with sdk.http_errors("https://a.test"):
            raise sdk.NonRetryableError("blocked", kind="ssrf_blocked")
    assert info.value.kind == "ssrf_blocked"
    with sdk.http_errors("https://a.test"):
        pass  # nothing raised, nothing mapped


def test_redact_url_keeps_only_scheme_host_and_port() -> None:
    assert sdk.redact_url("https://hooks.slack.com/services/T1/B2/s3cr3t?x=1") == (
        "https://hooks.slack.com/…"
    )
    assert sdk.redact_url("http://127.0.0.1:8025/hooks/abc") == "http://127.0.0.1:8025/…"
    assert sdk.redact_url("not a url") == "(URL)"


def test_raise_for_status_can_show_a_redacted_url() -> None:
    request = httpx.Request("POST", "https://hooks.example.test/services/secret-path")
    response = httpx.Response(503, request=request, text="down")
    with pytest.raises(sdk.ActionError) as info:
        sdk.raise_for_status(response, url=sdk.redact_url(request.url))
    assert "secret-path" not in info.value.message
    assert info.value.details["url"] == "https://hooks.example.test/…"


class Cfg(msgspec.Struct):
    name: str = "x"


class Greeting(msgspec.Struct):
    text: str


async def test_action_versions_live_side_by_side_and_the_latest_is_offered() -> None:
    @sdk.action("demo.greet", label="Greet", config=Cfg)
    async def greet_v1(config: Cfg, input: Any) -> dict[str, Any]:
        return {"text": f"hello {config.name}"}

    @sdk.action("demo.greet", label="Greet", config=Cfg, version=2)
    async def greet_v2(config: Cfg, input: Any) -> Greeting:
        return Greeting(f"Hello, {config.name}! (v{sdk.info().node_version})")

    connector = sdk.Connector(name="demo", label="Demo", version="1", actions=[greet_v2, greet_v1])
    assert connector.get("demo.greet") is greet_v2
    assert connector.get("demo.greet", 1) is greet_v1
    assert greet_v2.output_json_schema()["properties"] == {"text": {"type": "string"}}
    assert greet_v1.output_json_schema() == {"type": "object"}
    env = ActionTestEnvironment()
    assert await env.run(greet_v2, {"name": "Ada"}, None) == {"text": "Hello, Ada! (v2)"}
    with pytest.raises(ValueError, match=r"duplicate node type demo\.greet"):
        sdk.Connector(name="demo", label="Demo", version="1", actions=[greet_v1, greet_v1])
    with pytest.raises(ValueError, match=r"version must be an integer >= 1"):
        sdk.action("demo.greet", label="Greet", config=Cfg, version=0)
