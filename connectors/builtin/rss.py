"""Built-in RSS/Atom connector: the polling trigger ``rss.new_item`` ("RSS/Atom feed").

Each poll GETs the feed (RSS 0.9x/1.0/2.0, Atom 0.3/1.0, parsed by feedparser from the
bytes the SDK's guarded client fetched; feedparser never dials itself) and starts one run
per entry not seen before, oldest first. The run input of an entry::

    {"id": "tag:example.org,2025:1", "title": "...", "link": "https://...",
     "summary": "<p>...</p>", "content": [{"type": "text/html", "value": "..."}],
     "published": "2025-01-06T10:00:00Z", "updated": "2025-01-06T10:00:00Z",
     "author": "...", "tags": ["news"], "enclosures": [{"url", "type", "length"}],
     "feed": {"title": "...", "link": "https://..."}}

``published``/``updated`` are RFC 3339 UTC (``null`` when the feed has none); HTML in
``summary`` and ``content`` is sanitised by feedparser (no scripts, no event handlers).
The event id is the entry's ``id`` (RSS ``guid``, Atom ``id``), else its link, else
``sha256:`` of its title and date. The cursor ``{"seen": [ids], "etag", "modified"}``
keeps the ids of the last answers (see :mod:`connectors.builtin.polling`) and the
validators of the last answer: the next GET is conditional (``If-None-Match``,
``If-Modified-Since``) and a 304 starts nothing.
"""

from __future__ import annotations

import calendar
import hashlib
import time
from typing import Annotated, Any

import feedparser
import msgspec

from connectors import sdk
from connectors.builtin import polling
from connectors.builtin.http_auth import AuthCredential, apply_auth

__all__ = ["FeedConfig", "FeedEntry", "connector", "new_item"]


class FeedConfig(msgspec.Struct, kw_only=True):
    """Config of ``rss.new_item``."""

    url: Annotated[
        str,
        msgspec.Meta(
            title="Feed URL",
            description="http or https URL of an RSS or Atom feed",
            extra_json_schema={"format": "uri"},
        ),
    ]
    credential: AuthCredential = None
    keep_ids: polling.KeepIds = polling.DEFAULT_KEEP
    request_timeout: polling.RequestTimeout = 30.0


class Enclosure(msgspec.Struct):
    """A media file of an entry (podcast audio, an image)."""

    url: str
    type: str = ""
    length: int | None = None


class FeedInfo(msgspec.Struct):
    """The feed an entry came from."""

    title: str = ""
    link: str = ""


class FeedEntry(msgspec.Struct):
    """One feed entry: `id` (the dedupe key), `title`, `link`, `summary` and `content`
    (sanitised HTML or text), `published`/`updated` (RFC 3339 UTC or null), `author`,
    `tags` (terms), `enclosures` (media files) and the `feed`'s title and link."""

    id: str
    title: str
    link: str
    summary: str
    content: list[dict[str, str]]
    published: str | None
    updated: str | None
    author: str
    tags: list[str]
    enclosures: list[Enclosure]
    feed: FeedInfo


def _rfc3339(parsed: Any) -> str | None:
    if not isinstance(parsed, time.struct_time):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(calendar.timegm(parsed)))


def _length(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _entry(entry: Any, feed: FeedInfo) -> FeedEntry:
    """The run input of a feedparser entry (its ``id`` is the event id)."""
    # plain dict lookups: feedparser's own get() maps a missing updated_parsed to
    # published_parsed (with a DeprecationWarning)
    published = _rfc3339(dict.get(entry, "published_parsed"))
    updated = _rfc3339(dict.get(entry, "updated_parsed"))
    title = str(entry.get("title") or "")
    raw_id = str(entry.get("id") or entry.get("link") or "")
    if not raw_id:
        digest = hashlib.sha256(f"{title}\n{published or updated or ''}".encode()).hexdigest()
        raw_id = f"sha256:{digest}"
    links = entry.get("links") or []
    return FeedEntry(
        id=polling.event_id(raw_id),
        title=title,
        link=str(entry.get("link") or ""),
        summary=str(entry.get("summary") or ""),
        content=[
            {"type": str(c.get("type") or ""), "value": str(c.get("value") or "")}
            for c in entry.get("content") or []
        ],
        published=published,
        updated=updated,
        author=str(entry.get("author") or ""),
        tags=[str(t.get("term")) for t in entry.get("tags") or [] if t.get("term")],
        enclosures=[
            Enclosure(
                url=str(link["href"]),
                type=str(link.get("type") or ""),
                length=_length(link.get("length")),
            )
            for link in links
            if link.get("rel") == "enclosure" and link.get("href")
        ],
        feed=feed,
    )


def _oldest_first(entries: list[FeedEntry]) -> list[FeedEntry]:
    """Entries by date (published, else updated), oldest first, when every entry has
    one; else in the reverse of the feed's order (feeds list the newest first)."""
    if entries and all(e.published or e.updated for e in entries):
        return sorted(entries, key=lambda e: e.published or e.updated or "")
    return entries[::-1]


@sdk.polling_trigger(
    "rss.new_item",
    label="RSS/Atom feed",
    config=FeedConfig,
    interval=600,
    min_interval=60,
    category="Feeds",
    icon="rss",
    output=FeedEntry,
    output_example={
        "id": "tag:example.org,2025:1",
        "title": "Release 2.0",
        "link": "https://example.org/posts/2-0",
        "summary": "<p>What is new</p>",
        "content": [],
        "published": "2025-01-06T10:00:00Z",
        "updated": None,
        "author": "The team",
        "tags": ["release"],
        "enclosures": [],
        "feed": {"title": "Example blog", "link": "https://example.org/"},
    },
)
async def new_item(config: FeedConfig, cursor: Any) -> sdk.PollResult:
    """Start one run per new feed entry (RSS or Atom), oldest first.

    Raises a retryable ``ActionError`` for 429/5xx (``retry_after`` from ``Retry-After``),
    timeouts and refused connections, and for an answer that is not a feed (kind
    ``not_a_feed``); ``NonRetryableError`` for other 4xx answers.
    """
    headers: dict[str, str] = {"Accept": "application/rss+xml, application/atom+xml, */*;q=0.5"}
    params: list[tuple[str, str]] = []
    if config.credential:
        apply_auth(sdk.credential("credential"), headers, params)
    state = cursor if isinstance(cursor, dict) else {}
    if state.get("etag"):
        headers["If-None-Match"] = str(state["etag"])
    if state.get("modified"):
        headers["If-Modified-Since"] = str(state["modified"])
    response = await polling.fetch(
        config.url, headers, params, config.request_timeout, service="Feed"
    )
    if response.status_code == 304:
        return sdk.PollResult()
    parsed = feedparser.parse(
        response.content,
        response_headers={
            "content-location": str(response.url),
            "content-type": response.headers.get("content-type", ""),
        },
    )
    if not parsed.get("version") and not parsed.entries:
        reason = parsed.get("bozo_exception") or "no RSS or Atom document"
        raise sdk.ActionError(
            f"the answer of {config.url} is not a feed: {reason}", kind="not_a_feed"
        )
    feed = FeedInfo(
        title=str(parsed.feed.get("title") or ""), link=str(parsed.feed.get("link") or "")
    )
    entries = _oldest_first([_entry(e, feed) for e in parsed.entries])
    fresh, seen = polling.new_since([(e.id, e) for e in entries], cursor, config.keep_ids)
    next_cursor: dict[str, Any] = {
        **seen,
        "etag": response.headers.get("etag", ""),
        "modified": response.headers.get("last-modified", ""),
    }
    events = [
        sdk.TriggerEvent(id=item_id, data=msgspec.to_builtins(entry), meta={"entry_id": item_id})
        for item_id, entry in fresh
    ]
    return sdk.PollResult(events=events, cursor=next_cursor)


connector = sdk.Connector(
    name="rss",
    label="RSS/Atom",
    version="1.0.0",
    description="New entries of RSS and Atom feeds",
    triggers=[new_item],
    icon="rss",
)
