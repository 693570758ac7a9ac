"""The curated GitHub and Stripe connectors: made by the importer from pinned subsets of
the vendors' documents, which are valid, are exactly what the subset command gives from
the full documents, and call a local API as the documents say."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from connectors import sdk
from connectors.builtin.saas import airtable, github, jira, notion, stripe
from connectors.builtin.saas.curated import document
from connectors.openapi.loading import load_document
from connectors.openapi.subset import subset
from connectors.testing import ActionTestEnvironment
from tests.openapi_server import Call, ScriptedApi
from tests.openapi_server import document as full_document


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    server = ScriptedApi().start()
    yield server
    server.stop()


@pytest.mark.parametrize(("name", "module"), [("github", github), ("stripe", stripe)])
def test_pinned_subsets_are_valid_and_reproducible(name: str, module: Any) -> None:
    pinned = document(f"{name}.json.gz")
    load_document(json.dumps(pinned).encode())  # valid OpenAPI 3.0
    ids = {
        op["operationId"]
        for item in pinned["paths"].values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }
    assert subset(full_document(name), ids) == pinned
    assert len(ids) == len(module.OPERATIONS) == 10
    connector = module.connector
    assert [a.type for a in connector.actions] == [f"{name}.{k}" for k in module.OPERATIONS]
    assert [a.label for a in connector.actions] == list(module.OPERATIONS.values())
    assert connector.icon in ("git-pull-request", "credit-card")  # Lucide, as built-ins


async def _run(
    connector: sdk.Connector, node_type: str, api: ScriptedApi, config: dict[str, Any], **cred: Any
) -> Any:
    action = connector.get(node_type)
    assert action is not None
    env = ActionTestEnvironment(
        settings={f"{connector.name}.api_url": api.url},
        credentials={"c": cred},
        credential_types=list(connector.credential_types),
    )
    return await env.run(action, {"credential": "c", **config}, None)


async def test_github_issues_with_a_token(api: ScriptedApi) -> None:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        nxt = (
            {}
            if "page=2" in call.path or ("page", "2") in call.query
            else {"Link": f'<{url}/repositories/9/issues?page=2>; rel="next"'}
        )
        return 200, [{"number": len(api.calls), "title": "t"}], nxt

    api.answer = answer
    out = await _run(
        github.connector,
        "github.issues_list_for_repo",
        api,
        {"owner": "octo", "repo": "demo", "state": "open", "fetch_all_pages": True},
        type="github.token",
        token="ghp_x",
    )
    assert [i["number"] for i in out] == [1, 2]
    assert api.calls[0].path == "/repos/octo/demo/issues"
    assert {c.headers["authorization"] for c in api.calls} == {"Bearer ghp_x"}


async def test_stripe_refund_with_the_secret_key(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (200, {"id": "re_1", "object": "refund"}, {})
    await _run(
        stripe.connector,
        "stripe.post_refunds",
        api,
        {"payment_intent": "pi_1", "amount": 500, "metadata": {"order": "42"}},
        type="stripe.bearer_auth",
        token="sk_test_9",
    )
    call = api.calls[0]
    assert (call.method, call.path) == ("POST", "/v1/refunds")
    assert call.headers["authorization"] == "Bearer sk_test_9"
    assert sorted(call.form()) == [
        ("amount", "500"),
        ("metadata[order]", "42"),
        ("payment_intent", "pi_1"),
    ]


@pytest.mark.parametrize(
    ("name", "module", "count"),
    [("jira", jira, 7), ("notion", notion, 8), ("airtable", airtable, 6)],
)
def test_written_documents_are_valid(name: str, module: Any, count: int) -> None:
    source = f"connectors/builtin/saas/documents/{name}.yaml"
    with open(source, "rb") as f:
        load_document(f.read())  # valid OpenAPI 3.0, no alias, no remote reference
    assert [a.label for a in module.connector.actions] == list(module.OPERATIONS.values())
    assert len(module.OPERATIONS) == count


async def test_notion_sends_its_version_header_and_follows_cursors(api: ScriptedApi) -> None:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        more = dict(call.query).get("start_cursor") is None
        body = {"object": "list", "results": [{"id": str(len(api.calls))}]}
        return 200, {**body, "has_more": more, "next_cursor": "c2" if more else None}, {}

    api.answer = answer
    out = await _run(
        notion.connector,
        "notion.list_block_children",
        api,
        {"block_id": "b1", "fetch_all_pages": True},
        type="notion.token",
        token="secret_1",
    )
    assert [r["id"] for r in out["results"]] == ["1", "2"]
    assert {c.headers["notion-version"] for c in api.calls} == {"2022-06-28"}
    assert [dict(c.query).get("start_cursor") for c in api.calls] == [None, "c2"]


async def test_airtable_offsets_and_jira_jql_pages(api: ScriptedApi) -> None:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        query = dict(call.query)
        if call.path.startswith("/rest/api/3/search/jql"):
            last = query.get("nextPageToken") == "t2"
            page = {"issues": [{"key": f"P-{len(api.calls)}"}], "isLast": last}
            return 200, page if last else {**page, "nextPageToken": "t2"}, {}
        if call.path == "/rest/api/3/issue/P-1/transitions":
            return 204, b"", {}
        first = "offset" not in query
        page = {"records": [{"id": f"rec{len(api.calls)}", "fields": {}}]}
        return 200, {**page, "offset": "itr2"} if first else page, {}

    api.answer = answer
    out = await _run(
        airtable.connector,
        "airtable.list_records",
        api,
        {"base_id": "app1", "table_id_or_name": "Tasks", "fetch_all_pages": True},
        type="airtable.token",
        token="pat1",
    )
    assert [r["id"] for r in out["records"]] == ["rec1", "rec2"]
    assert api.calls[1].query == [("offset", "itr2")]
    api.calls.clear()
    basic = {"type": "jira.basic_auth", "username": "me@example.com", "password": "tok"}
    out = await _run(
        jira.connector,
        "jira.search_issues",
        api,
        {"jql": "project = P", "fields": ["summary", "status"], "fetch_all_pages": True},
        **basic,
    )
    assert [i["key"] for i in out["issues"]] == ["P-1", "P-2"]
    assert api.calls[0].query == [("jql", "project = P"), ("fields", "summary,status")]
    assert api.calls[1].query[-1] == ("nextPageToken", "t2")
    api.calls.clear()
    out = await _run(
        jira.connector,
        "jira.transition_issue",
        api,
        {"issue_id_or_key": "P-1", "transition": {"id": "31"}},
        **basic,
    )
    assert out == {"status": 204}
    assert api.calls[0].json() == {"transition": {"id": "31"}}
