"""http.request bodies, auth from credentials, redirects, formats, pagination; webhook.send."""

from __future__ import annotations

import base64
import json

import pytest

from connectors import sdk
from connectors.builtin.http import API_KEY, BASIC, BEARER, http_request
from connectors.builtin.webhook import sign, webhook_send
from connectors.testing import ActionTestEnvironment
from tests.unit.connectors.output_schema import assert_declared_output

CREDS = {
    "b": {"type": "basic", "kind": "basic", "username": "ada", "password": "pw-123"},
    "t": {"type": "bearer", "kind": "bearer", "token": "tok-456"},
    "k": {"type": "api_key", "kind": "api_key", "api_key": "key-789", "name": "X-Key"},
    "q": {
        "type": "api_key",
        "kind": "api_key",
        "api_key": "key-q",
        "placement": "query",
        "name": "api_key",
    },
    "w": {"type": "webhook_secret", "secret": "whsec-1"},
}


def _env() -> ActionTestEnvironment:
    return ActionTestEnvironment(credentials=CREDS, credential_types=[API_KEY, BASIC, BEARER])


async def test_form_multipart_and_raw_bodies(local_server: str) -> None:
    env = _env()
    form = await env.run(
        http_request,
        {
            "method": "POST",
            "url": f"{local_server}/raw",
            "body_type": "form",
            "body": {"a": "1", "tag": ["x", "y"]},
        },
        None,
    )
    assert form["body"]["content_type"] == "application/x-www-form-urlencoded"
    assert form["body"]["raw"] == "a=1&tag=x&tag=y"
    multi = await env.run(
        http_request,
        {
            "method": "POST",
            "url": f"{local_server}/raw",
            "body_type": "multipart",
            "body": {
                "note": "hi",
                "file": {
                    "filename": "f.txt",
                    "content_base64": base64.b64encode(b"FILEDATA").decode(),
                    "content_type": "text/plain",
                },
            },
        },
        None,
    )
    assert multi["body"]["content_type"].startswith("multipart/form-data; boundary=")
    assert 'name="note"' in multi["body"]["raw"] and "FILEDATA" in multi["body"]["raw"]
    assert 'filename="f.txt"' in multi["body"]["raw"]
    raw = await env.run(
        http_request,
        {
            "method": "PUT",
            "url": f"{local_server}/raw",
            "body_type": "raw",
            "body": "<x/>",
            "content_type": "application/xml",
        },
        None,
    )
    assert raw["body"] == {
        "method": "PUT",
        "content_type": "application/xml",
        "authorization": "",
        "raw": "<x/>",
    }


# The local server echoes what it received; the echo of a credential's secret is redacted
# from the output (connectors/sdk/redaction.py), so these see where the secret went.
@pytest.mark.parametrize(
    ("cred", "header"), [("b", "Basic [redacted]"), ("t", "Bearer [redacted]")]
)
async def test_auth_headers_from_credentials(local_server: str, cred: str, header: str) -> None:
    out = await _env().run(http_request, {"url": f"{local_server}/raw", "credential": cred}, None)
    assert out["body"]["authorization"] == header


async def test_api_key_in_header_and_query(local_server: str) -> None:
    env = _env()
    out = await env.run(http_request, {"url": f"{local_server}/echo", "credential": "k"}, None)
    assert out["body"]["headers"]["x-key"] == "[redacted]"
    out = await env.run(
        http_request,
        {"url": f"{local_server}/echo", "credential": "q", "query": {"a": "1"}},
        None,
    )
    assert out["body"]["query"] == {"a": ["1"], "api_key": ["[redacted]"]}
    assert out["url"].endswith("?a=1&api_key=[redacted]")


async def test_redirects_followed_up_to_the_max(local_server: str) -> None:
    env = _env()
    out = await env.run(http_request, {"url": f"{local_server}/redirect?n=3"}, None)
    assert out["status"] == 200 and out["url"] == f"{local_server}/raw"
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(
            http_request, {"url": f"{local_server}/redirect?n=3", "max_redirects": 2}, None
        )
    assert err.value.kind == "too_many_redirects"
    out = await env.run(
        http_request, {"url": f"{local_server}/redirect?n=1", "follow_redirects": False}, None
    )
    assert out["status"] == 302
    # 303 turns POST into GET; 307 keeps POST and its body.
    out = await env.run(
        http_request,
        {"method": "POST", "url": f"{local_server}/redirect?status=303", "body": {"a": 1}},
        None,
    )
    assert out["body"]["method"] == "GET" and out["body"]["raw"] == ""
    out = await env.run(
        http_request,
        {"method": "POST", "url": f"{local_server}/redirect?status=307", "body": {"a": 1}},
        None,
    )
    assert out["body"]["method"] == "POST" and json.loads(out["body"]["raw"]) == {"a": 1}


async def test_redirect_to_a_blocked_address_is_refused(local_server: str) -> None:
    env = ActionTestEnvironment(ssrf=sdk.SsrfPolicy(allowlist=("127.0.0.1",)))
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(
            http_request,
            {"url": f"{local_server}/redirect?to=http://169.254.169.254/latest/meta-data"},
            None,
        )
    assert err.value.kind == "ssrf_blocked"


async def test_auth_header_dropped_on_cross_host_redirect(local_server: str) -> None:
    other = local_server.replace("127.0.0.1", "localhost")
    out = await _env().run(
        http_request,
        {"url": f"{local_server}/redirect?to={other}/raw", "credential": "t"},
        None,
    )
    assert out["body"]["authorization"] == ""


async def test_response_formats(local_server: str) -> None:
    env = _env()
    out = await env.run(
        http_request, {"url": f"{local_server}/text", "response_format": "bytes"}, None
    )
    assert out["body"]["base64"] == base64.b64encode(b"hello").decode()
    assert out["body"]["size"] == 5
    out = await env.run(
        http_request, {"url": f"{local_server}/echo", "response_format": "text"}, None
    )
    assert isinstance(out["body"], str)
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(
            http_request, {"url": f"{local_server}/text", "response_format": "json"}, None
        )
    assert err.value.kind == "http_invalid_json"


@pytest.mark.parametrize(
    "config", [{"pagination": "link_header"}, {"pagination": "body_field", "next_field": "next"}]
)
async def test_pagination(local_server: str, config: dict[str, str]) -> None:
    env = _env()
    out = await env.run(http_request, {"url": f"{local_server}/pages", **config}, None)
    assert [p["page"] for p in out["pages"]] == [1, 2, 3]
    assert out["body"]["page"] == 3
    out = await env.run(
        http_request, {"url": f"{local_server}/pages", "max_pages": 2, **config}, None
    )
    assert [p["page"] for p in out["pages"]] == [1, 2]


async def test_webhook_send_signs_the_body(local_server: str) -> None:
    env = ActionTestEnvironment(credentials=CREDS)
    out = await env.run(
        webhook_send, {"url": f"{local_server}/echo", "credential": "w"}, {"event": "x"}
    )
    headers = out["body"]["headers"]
    body = json.dumps(out["body"]["body"], separators=(",", ":")).encode()
    ts = int(headers["x-railyard-timestamp"])
    assert headers["x-railyard-signature"] == sign("whsec-1", ts, body)
    assert headers["idempotency-key"] == "run-test:step-test"
    assert out["body"]["body"] == {"event": "x"}


async def test_http_request_output_matches_declared_schema(local_server: str) -> None:
    env = _env()
    echoed = await env.run(
        http_request, {"url": f"{local_server}/echo", "query": {"q": ["a", "b"]}}, None
    )
    assert echoed["body"]["query"] == {"q": ["a", "b"]} and "pages" not in echoed
    assert_declared_output(http_request, echoed)
    paged = await env.run(
        http_request, {"url": f"{local_server}/pages", "pagination": "link_header"}, None
    )
    assert paged["url"].endswith("/pages?page=3") and len(paged["pages"]) == 3
    assert_declared_output(http_request, paged)
    raw = await env.run(
        http_request, {"url": f"{local_server}/text", "response_format": "bytes"}, None
    )
    assert raw["body"]["size"] == 5
    assert_declared_output(http_request, raw)
    missing = await env.run(
        http_request, {"url": f"{local_server}/missing", "fail_on_error_status": False}, None
    )
    assert missing["status"] == 404
    assert_declared_output(http_request, missing)


async def test_webhook_send_output_matches_declared_schema(local_server: str) -> None:
    env = ActionTestEnvironment(credentials=CREDS)
    echoed = await env.run(webhook_send, {"url": f"{local_server}/echo"}, {"event": "x"})
    assert echoed["status"] == 200 and echoed["body"]["body"] == {"event": "x"}
    assert_declared_output(webhook_send, echoed)
    text = await env.run(webhook_send, {"url": f"{local_server}/text", "payload": [1]}, None)
    assert text == {"status": 200, "body": "hello"}
    assert_declared_output(webhook_send, text)
