"""``http.new_items`` ("New items at a URL") against a local JSON server."""

from __future__ import annotations

from typing import Any

import pytest

from connectors import sdk
from connectors.builtin.http import BEARER, connector, new_items
from connectors.testing import TriggerTestEnvironment
from tests.fakes.feeds import ItemsAndFeeds


def _items(*numbers: int) -> list[dict[str, Any]]:
    """Items newest first (the highest number first), as the server lists them."""
    return [
        {"id": n, "title": f"item {n}", "updated_at": f"2025-01-{n:02d}T00:00:00Z"}
        for n in sorted(numbers, reverse=True)
    ]


def _config(feed_api: ItemsAndFeeds, **extra: Any) -> dict[str, Any]:
    return {"url": f"{feed_api.url}/items", "items": "data.items", "id": "id", **extra}


def test_the_trigger_belongs_to_the_http_connector() -> None:
    assert list(connector.triggers) == [new_items]
    assert new_items.kind == "polling" and new_items.type == "http.new_items"
    schema = new_items.config_json_schema()
    assert schema["required"] == ["url"]
    assert schema["properties"]["credential"]["x-credential-type"] == [
        "basic",
        "bearer",
        "api_key",
        "oauth2",
    ]


async def test_new_items_oldest_first_and_each_once(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    feed_api.items = _items(1, 2, 3)
    first = await env.poll(new_items, _config(feed_api), cursor=None)
    assert [e.id for e in first.events] == ["1", "2", "3"]
    assert first.events[0].data == {
        "id": 1,
        "title": "item 1",
        "updated_at": "2025-01-01T00:00:00Z",
    }
    assert first.events[0].meta == {"item_id": "1"}
    assert first.cursor == {"seen": ["1", "2", "3"]}
    again = await env.poll(new_items, _config(feed_api), cursor=first.cursor)
    assert again.events == []
    feed_api.items = _items(2, 3, 4, 5)  # 1 fell off the list, 4 and 5 are new
    later = await env.poll(new_items, _config(feed_api), cursor=again.cursor)
    assert [e.id for e in later.events] == ["4", "5"]
    assert later.cursor == {"seen": ["1", "2", "3", "4", "5"]}


async def test_ids_remembered_are_bounded_but_cover_one_answer(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    feed_api.items = _items(1, 2, 3, 4, 5)
    first = await env.poll(new_items, _config(feed_api, keep_ids=3), cursor=None)
    assert first.cursor == {"seen": ["1", "2", "3", "4", "5"]}  # the whole answer
    feed_api.items = _items(6)
    later = await env.poll(new_items, _config(feed_api, keep_ids=3), cursor=first.cursor)
    assert [e.id for e in later.events] == ["6"]
    assert later.cursor == {"seen": ["4", "5", "6"]}


async def test_item_path_and_id_expressions(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    feed_api.items = [
        {"sku": "A", "version": 2, "name": "a2"},
        {"sku": "A", "version": 1, "name": "a1"},
        {"sku": "A", "version": 1, "name": "a1 again"},  # the same id twice: one event
        {"name": "no sku"},  # no id: left out
    ]
    config = _config(feed_api, items="=data.items[name != 'skip']", id="sku ? sku & '-' & version")
    got = await env.poll(new_items, config, cursor=None)
    assert [(e.id, e.data["name"]) for e in got.events] == [("A-1", "a1 again"), ("A-2", "a2")]
    # one object instead of a list is one item; an object id is its JSON text
    single = await env.poll(
        new_items, _config(feed_api, items="data.items[0]", id="{'s': sku}"), cursor=None
    )
    assert [e.id for e in single.events] == ['{"s":"A"}']
    nothing = await env.poll(new_items, _config(feed_api, items="data.missing"), cursor=None)
    assert nothing.events == [] and nothing.cursor == {"seen": []}


async def test_long_ids_are_hashed(feed_api: ItemsAndFeeds) -> None:
    feed_api.items = [{"id": "x" * 300}]
    got = await TriggerTestEnvironment().poll(new_items, _config(feed_api), cursor=None)
    assert got.events[0].id.startswith("sha256:") and len(got.events[0].id) == 71


@pytest.mark.parametrize("field", ["items", "id", "order"])
async def test_invalid_jsonata_is_a_config_error_naming_the_field(
    feed_api: ItemsAndFeeds, field: str
) -> None:
    feed_api.items = _items(1)
    with pytest.raises(sdk.ConfigError) as err:
        await TriggerTestEnvironment().poll(new_items, _config(feed_api, **{field: "a.["}), None)
    assert err.value.details == {"field": field}
    assert field in err.value.message and "JSONata" in err.value.message


async def test_newest_mode_uses_the_order_value(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    config = _config(feed_api, mode="newest", order="updated_at", listed="oldest_first")
    feed_api.items = _items(3, 1, 2)
    first = await env.poll(new_items, config, cursor=None)
    assert [e.id for e in first.events] == ["1", "2", "3"]
    assert first.cursor == {"after": "2025-01-03T00:00:00Z"}
    feed_api.items = _items(2, 3, 4)
    later = await env.poll(new_items, config, cursor=first.cursor)
    assert [e.id for e in later.events] == ["4"]
    same = await env.poll(new_items, config, cursor=later.cursor)
    assert same.events == [] and same.cursor is None  # None keeps the stored cursor
    with pytest.raises(sdk.ConfigError, match="Order"):
        await env.poll(new_items, _config(feed_api, mode="newest"), cursor=None)


async def test_order_sorts_seen_id_runs(feed_api: ItemsAndFeeds) -> None:
    feed_api.items = [{"id": "b", "n": 2}, {"id": "c", "n": 3}, {"id": "a", "n": 1}]
    got = await TriggerTestEnvironment().poll(new_items, _config(feed_api, order="n"), cursor=None)
    assert [e.id for e in got.events] == ["a", "b", "c"]


async def test_rate_limit_and_server_errors_carry_retry_after(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    feed_api.fail_next = [(429, {"Retry-After": "7"}), (500, {"Retry-After": "11"}), (502, {})]
    with pytest.raises(sdk.ActionError) as limited:
        await env.poll(new_items, _config(feed_api), cursor={"seen": ["1"]})
    assert (limited.value.kind, limited.value.retryable, limited.value.retry_after) == (
        "http_429",
        True,
        7.0,
    )
    with pytest.raises(sdk.ActionError) as failed:
        await env.poll(new_items, _config(feed_api), cursor=None)
    assert (failed.value.kind, failed.value.retry_after) == ("http_500", 11.0)
    with pytest.raises(sdk.ActionError) as bad_gateway:
        await env.poll(new_items, _config(feed_api), cursor=None)
    assert bad_gateway.value.retryable and bad_gateway.value.retry_after is None
    feed_api.items = _items(1)
    recovered = await env.poll(new_items, _config(feed_api), cursor={"seen": []})
    assert [e.id for e in recovered.events] == ["1"]


async def test_client_errors_and_non_json_answers(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    with pytest.raises(sdk.NonRetryableError) as missing:
        await env.poll(new_items, {"url": f"{feed_api.url}/nowhere"}, cursor=None)
    assert missing.value.kind == "http_404"
    with pytest.raises(sdk.ActionError) as html:
        await env.poll(new_items, {"url": f"{feed_api.url}/not-json"}, cursor=None)
    assert html.value.kind == "http_invalid_json" and html.value.retryable


async def test_headers_query_and_credential_are_sent(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment(
        credentials={"tok": {"type": "bearer", "token": "t0k"}}, credential_types=[BEARER]
    )
    feed_api.items = _items(1)
    config = _config(
        feed_api, headers={"X-Tenant": "acme"}, query={"tag": ["a", "b"]}, credential="tok"
    )
    await env.poll(new_items, config, cursor=None)
    request = feed_api.requests[-1]
    assert request.path == "/items?tag=a&tag=b"
    assert request.headers["x-tenant"] == "acme"
    assert request.headers["authorization"] == "Bearer t0k"
    assert env.credential_uses == [("tok", "credential")]


async def test_private_addresses_are_refused_by_default(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment(ssrf=sdk.SsrfPolicy())
    with pytest.raises(sdk.NonRetryableError) as refused:
        await env.poll(new_items, _config(feed_api), cursor=None)
    assert refused.value.kind == "ssrf_blocked"
    assert feed_api.requests == []
