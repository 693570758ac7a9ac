"""``rss.new_item`` ("RSS/Atom feed") against local RSS 2.0 and Atom 1.0 feeds."""

from __future__ import annotations

import pytest

from connectors import sdk
from connectors.builtin.rss import connector, new_item
from connectors.testing import TriggerTestEnvironment
from tests.fakes.feeds import ItemsAndFeeds

RSS_ITEM = """
    <item>
      <title>Post {n}</title>
      <link>/posts/{n}</link>
      <guid isPermaLink="false">post-{n}</guid>
      <pubDate>Mon, {n:02d} Jan 2025 10:00:00 GMT</pubDate>
      <description>&lt;p&gt;Body {n}&lt;/p&gt;&lt;script&gt;alert(1)&lt;/script&gt;</description>
      <category>news</category>
      <enclosure url="https://cdn.example.org/{n}.mp3" length="1234" type="audio/mpeg"/>
    </item>"""


def rss(*numbers: int, extra: str = "") -> str:
    """An RSS 2.0 feed listing posts ``numbers`` in the given order."""
    items = "".join(RSS_ITEM.format(n=n) for n in numbers)
    return f"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0">
  <channel>
    <title>Example blog</title>
    <link>https://example.org/</link>
    <description>Posts</description>{items}{extra}
  </channel>
</rss>"""


ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom">
  <title>Example changes</title>
  <link href="https://example.org/changes"/>
  <id>urn:uuid:60a76c80-d399-11d9-b93C-0003939e0af6</id>
  <updated>2025-02-02T12:00:00Z</updated>
  <entry>
    <title>Second</title>
    <link href="https://example.org/changes/2"/>
    <id>tag:example.org,2025:2</id>
    <updated>2025-02-02T12:00:00+01:00</updated>
    <author><name>Ada</name></author>
    <content type="html">&lt;em&gt;two&lt;/em&gt;</content>
  </entry>
  <entry>
    <title>First</title>
    <link href="https://example.org/changes/1"/>
    <id>tag:example.org,2025:1</id>
    <updated>2025-02-01T12:00:00Z</updated>
    <summary>one</summary>
  </entry>
</feed>"""


def test_the_connector_declares_one_polling_trigger() -> None:
    assert connector.name == "rss" and list(connector.triggers) == [new_item]
    assert new_item.kind == "polling" and new_item.type == "rss.new_item"
    output = new_item.output_json_schema()
    assert {"id", "title", "link", "published", "enclosures", "feed"} <= set(output["properties"])


async def test_rss_entries_oldest_first_with_their_fields(feed_api: ItemsAndFeeds) -> None:
    feed_api.feeds["/feed.rss"] = ("application/rss+xml", rss(3, 2, 1))
    got = await TriggerTestEnvironment().poll(new_item, {"url": f"{feed_api.url}/feed.rss"}, None)
    assert [e.data["title"] for e in got.events] == ["Post 1", "Post 2", "Post 3"]
    first = got.events[0]
    assert first.id == first.data["id"] and first.meta == {"entry_id": first.id}
    assert first.id.endswith("post-1")
    assert first.data["link"] == f"{feed_api.url}/posts/1"  # relative to the feed's URL
    assert first.data["published"] == "2025-01-01T10:00:00Z"
    assert first.data["summary"] == "<p>Body 1</p>"  # the script is gone
    assert first.data["tags"] == ["news"]
    assert first.data["enclosures"] == [
        {"url": "https://cdn.example.org/1.mp3", "type": "audio/mpeg", "length": 1234}
    ]
    assert first.data["feed"] == {"title": "Example blog", "link": "https://example.org/"}
    assert got.cursor["seen"] == [e.id for e in got.events]


async def test_atom_entries(feed_api: ItemsAndFeeds) -> None:
    feed_api.feeds["/feed.atom"] = ("application/atom+xml", ATOM)
    got = await TriggerTestEnvironment().poll(new_item, {"url": f"{feed_api.url}/feed.atom"}, None)
    assert [e.id for e in got.events] == ["tag:example.org,2025:1", "tag:example.org,2025:2"]
    second = got.events[1].data
    assert second["updated"] == "2025-02-02T11:00:00Z"  # in UTC
    assert second["author"] == "Ada"
    assert second["content"] == [{"type": "text/html", "value": "<em>two</em>"}]
    assert got.events[0].data["summary"] == "one"


async def test_conditional_get_and_new_entries_only(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    config = {"url": f"{feed_api.url}/feed.rss"}
    feed_api.feeds["/feed.rss"] = ("application/rss+xml", rss(2, 1))
    first = await env.poll(new_item, config, None)
    assert len(first.events) == 2 and first.cursor["etag"].startswith('"')
    assert first.cursor["modified"] == "Mon, 06 Jan 2025 10:00:00 GMT"
    unchanged = await env.poll(new_item, config, first.cursor)
    assert unchanged.events == [] and unchanged.cursor is None  # 304: keep the cursor
    sent = feed_api.requests[-1].headers
    assert sent["if-none-match"] == first.cursor["etag"]
    assert sent["if-modified-since"] == "Mon, 06 Jan 2025 10:00:00 GMT"
    feed_api.feeds["/feed.rss"] = ("application/rss+xml", rss(4, 3, 2))  # 1 dropped off
    later = await env.poll(new_item, config, first.cursor)
    assert [e.data["title"] for e in later.events] == ["Post 3", "Post 4"]
    assert later.cursor["etag"] != first.cursor["etag"]
    assert len(later.cursor["seen"]) == 4


async def test_an_entry_without_id_or_link_gets_a_stable_id(feed_api: ItemsAndFeeds) -> None:
    bare = "<item><title>Bare</title><pubDate>Tue, 07 Jan 2025 10:00:00 GMT</pubDate></item>"
    feed_api.feeds["/feed.rss"] = ("application/rss+xml", rss(1, extra=bare))
    env = TriggerTestEnvironment()
    first = await env.poll(new_item, {"url": f"{feed_api.url}/feed.rss"}, None)
    second = await env.poll(new_item, {"url": f"{feed_api.url}/feed.rss"}, None)
    bare_ids = [e.id for e in first.events if e.data["title"] == "Bare"]
    assert len(bare_ids) == 1 and bare_ids[0].startswith("sha256:")
    assert bare_ids == [e.id for e in second.events if e.data["title"] == "Bare"]


async def test_not_a_feed_and_server_errors(feed_api: ItemsAndFeeds) -> None:
    env = TriggerTestEnvironment()
    with pytest.raises(sdk.ActionError) as html:
        await env.poll(new_item, {"url": f"{feed_api.url}/not-json"}, None)
    assert html.value.kind == "not_a_feed" and html.value.retryable
    feed_api.fail_next = [(503, {"Retry-After": "120"})]
    with pytest.raises(sdk.ActionError) as down:
        await env.poll(new_item, {"url": f"{feed_api.url}/feed.rss"}, None)
    assert (down.value.kind, down.value.retry_after) == ("http_503", 120.0)
    with pytest.raises(sdk.NonRetryableError) as gone:
        await env.poll(new_item, {"url": f"{feed_api.url}/feed.rss"}, None)
    assert gone.value.kind == "http_404"
