"""Operations of the committed documents call a local API exactly as the documents say:
path, query, header and body parameters, credentials, pagination."""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterator
from typing import Any

import pytest

from connectors import sdk
from connectors.openapi.importer import build_definition
from connectors.openapi.loading import load_document
from connectors.openapi.runtime import connector_of
from connectors.testing import ActionTestEnvironment
from tests.openapi_server import Call, ScriptedApi, document_bytes


@functools.cache
def _connector(name: str) -> sdk.Connector:
    doc, version = load_document(document_bytes(name))
    return connector_of([(build_definition(doc, name=name, openapi_version=version), {})])


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    server = ScriptedApi().start()
    yield server
    server.stop()


async def _run(name: str, key: str, api: ScriptedApi, config: dict[str, Any], **env: Any) -> Any:
    connector = _connector(name)
    action = connector.get(f"{name}.{key}")
    assert action is not None
    environment = ActionTestEnvironment(
        settings={f"{name}.api_url": api.url},
        credential_types=list(connector.credential_types),
        **env,
    )
    return await environment.run(action, config, None)


async def test_github_list_issues_follows_link_pages(api: ScriptedApi) -> None:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        page = int(dict(call.query).get("page", "1"))
        headers = {}
        if page < 3:
            headers["Link"] = (
                f'<{url}/repositories/1/issues?state=closed&page={page + 1}>; rel="next", '
                f'<{url}/repositories/1/issues?page=3>; rel="last"'
            )
        return 200, [{"number": page * 10 + i, "title": f"t{page}"} for i in range(2)], headers

    api.answer = answer
    out = await _run(
        "github",
        "issues_list_for_repo",
        api,
        {
            "owner": "octo cat",
            "repo": "hello",
            "state": "closed",
            "labels": "bug,ui",
            "per_page": 2,
            "fetch_all_pages": True,
            "max_pages": 10,
        },
    )
    assert [i["number"] for i in out] == [10, 11, 20, 21, 30, 31]
    first = api.calls[0]
    assert (first.method, first.path) == ("GET", "/repos/octo%20cat/hello/issues")
    assert first.query == [("state", "closed"), ("labels", "bug,ui"), ("per_page", "2")]
    assert [c.path for c in api.calls[1:]] == ["/repositories/1/issues"] * 2


async def test_github_pages_stop_at_the_cap(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (200, [{"n": 1}], {"Link": f'<{url}/next>; rel="next"'})
    out = await _run(
        "github",
        "issues_list_for_repo",
        api,
        {"owner": "o", "repo": "r", "fetch_all_pages": True, "max_pages": 3},
    )
    assert len(out) == 3 and len(api.calls) == 3


async def test_github_link_to_another_host_is_not_followed(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (200, [{"n": 1}], {"Link": '<http://10.1.2.3/x>; rel="next"'})
    with pytest.raises(sdk.NonRetryableError) as caught:
        await _run(
            "github",
            "issues_list_for_repo",
            api,
            {"owner": "o", "repo": "r", "fetch_all_pages": True},
        )
    assert caught.value.kind == "pagination_foreign_link"


async def test_github_create_issue_sends_the_json_body(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (201, {"number": 7, "title": call.json()["title"]}, {})
    out = await _run(
        "github",
        "issues_create",
        api,
        {"owner": "o", "repo": "r", "title": "Broken", "labels": ["bug"], "assignees": ["me"]},
    )
    assert out == {"number": 7, "title": "Broken"}
    call = api.calls[0]
    assert (call.method, call.path) == ("POST", "/repos/o/r/issues")
    assert call.headers["content-type"] == "application/json"
    assert call.json() == {"title": "Broken", "labels": ["bug"], "assignees": ["me"]}


async def test_github_missing_required_field_is_a_config_error(api: ScriptedApi) -> None:
    with pytest.raises(sdk.ConfigError) as caught:
        await _run("github", "issues_create", api, {"owner": "o", "repo": "r"})
    assert "'title' is a required property" in str(caught.value)
    assert api.calls == []


async def test_stripe_customers_cursor_pages_with_basic_auth(api: ScriptedApi) -> None:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        after = dict(call.query).get("starting_after")
        start = 0 if after is None else int(after.removeprefix("cus_")) + 1
        ids = list(range(start, min(start + 2, 5)))
        body = {
            "object": "list",
            "url": "/v1/customers",
            "has_more": ids[-1] < 4,
            "data": [{"id": f"cus_{i}", "object": "customer"} for i in ids],
        }
        return 200, body, {}

    api.answer = answer
    out = await _run(
        "stripe",
        "get_customers",
        api,
        {"credential": "c1", "limit": 2, "email": "a@b.c", "fetch_all_pages": True},
        credentials={"c1": {"type": "stripe.basic_auth", "username": "sk_test_1", "password": ""}},
    )
    assert [c["id"] for c in out["data"]] == [f"cus_{i}" for i in range(5)]
    assert out["has_more"] is False
    assert [dict(c.query).get("starting_after") for c in api.calls] == [None, "cus_1", "cus_3"]
    assert api.calls[0].query == [("email", "a@b.c"), ("limit", "2")]
    expected = "Basic " + base64.b64encode(b"sk_test_1:").decode()
    assert {c.headers["authorization"] for c in api.calls} == {expected}


async def test_stripe_create_customer_sends_a_bracketed_form(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (200, {"id": "cus_1", "object": "customer"}, {})
    await _run(
        "stripe",
        "post_customers",
        api,
        {
            "credential": "c1",
            "email": "a@b.c",
            "metadata": {"plan": "pro"},
            "preferred_locales": ["en", "fr"],
        },
        credentials={"c1": {"type": "stripe.bearer_auth", "token": "sk_test_2"}},
    )
    call = api.calls[0]
    assert (call.method, call.path) == ("POST", "/v1/customers")
    assert call.headers["content-type"] == "application/x-www-form-urlencoded"
    assert call.headers["authorization"] == "Bearer sk_test_2"
    assert call.form() == [
        ("email", "a@b.c"),
        ("metadata[plan]", "pro"),
        ("preferred_locales[0]", "en"),
        ("preferred_locales[1]", "fr"),
    ]


async def test_outline_oauth2_token_is_sent(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (200, {"data": [], "pagination": {}}, {})
    credential = {
        "type": "outline.oauth2",
        "client_id": "id",
        "client_secret": "s",
        "access_token": "tok-1",
        "token_type": "bearer",
    }
    await _run(
        "outline",
        "documents_list",
        api,
        {"credential": "c1", "limit": 5},
        credentials={"c1": credential},
    )
    call = api.calls[0]
    assert (call.method, call.path) == ("POST", "/documents.list")
    assert call.headers["authorization"] == "Bearer tok-1"
    assert call.json() == {"limit": 5}
