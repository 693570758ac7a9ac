"""``http.new_items`` ("New items at a URL"): a polling trigger that GETs a JSON document,
picks its items with a JSONata path and starts one run per item not seen before.

Part of the HTTP connector (:mod:`connectors.builtin.http`); what is "new" and the cursor
are in :mod:`connectors.builtin.polling`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from connectors import sdk
from connectors.builtin import polling
from connectors.builtin.http_auth import AuthCredential, apply_auth, query_params

__all__ = ["NewItemsConfig", "new_items"]


class NewItemsConfig(msgspec.Struct, kw_only=True):
    """Config of ``http.new_items``."""

    url: Annotated[
        str,
        msgspec.Meta(
            title="URL",
            description="http or https URL answering JSON",
            extra_json_schema={"format": "uri"},
        ),
    ]
    items: Annotated[
        str,
        msgspec.Meta(
            title="Items",
            description="JSONata path of the item list in the answer, e.g. data.items "
            "($ when the answer is the list)",
        ),
    ] = "$"
    id: Annotated[
        str,
        msgspec.Meta(
            title="Item id",
            description="JSONata expression of an item's unique id, evaluated on the item, "
            "e.g. id or sku & '-' & version",
        ),
    ] = "id"
    mode: Annotated[
        Literal["seen_ids", "newest"],
        msgspec.Meta(
            title="New means",
            description="Seen ids: an item whose id was not in the last answers. Newest: "
            "an item whose Order value is greater than the greatest seen so far.",
            extra_json_schema={
                "x-enum-labels": {
                    "seen_ids": "An id not seen before",
                    "newest": "Newer than the newest seen (Order)",
                }
            },
        ),
    ] = "seen_ids"
    order: Annotated[
        str,
        msgspec.Meta(
            title="Order",
            description="JSONata expression of a number or an ISO 8601 time per item, "
            "e.g. updated_at; orders the runs (oldest first) and, with Newest, decides "
            "what is new. Empty: the answer's own order, oldest first as Listed.",
        ),
    ] = ""
    listed: Annotated[
        Literal["newest_first", "oldest_first"],
        msgspec.Meta(
            title="Listed",
            description="How the answer orders its items (used when Order is empty)",
            extra_json_schema={
                "x-enum-labels": {
                    "newest_first": "Newest first",
                    "oldest_first": "Oldest first",
                }
            },
        ),
    ] = "newest_first"
    headers: Annotated[
        dict[str, str], msgspec.Meta(title="Headers", description="Request headers")
    ] = {}
    query: Annotated[
        dict[str, str | list[str]],
        msgspec.Meta(title="Query parameters", description="A list repeats the parameter"),
    ] = {}
    credential: AuthCredential = None
    keep_ids: polling.KeepIds = polling.DEFAULT_KEEP
    request_timeout: polling.RequestTimeout = 30.0


def _item_ids(config: NewItemsConfig, body: Any) -> list[tuple[str, Any, Any]]:
    """``(event id, item, order key)`` of every item of ``body`` with an id, oldest
    first when no Order is set (ids that are objects or lists are JSON-encoded)."""
    items = polling.evaluate(polling.compile_jsonata(config.items, "items"), body, "items")
    id_expr = polling.compile_jsonata(config.id, "id")
    order_expr = polling.compile_jsonata(config.order, "order") if config.order.strip() else None
    if items is None:
        items = []
    elif not isinstance(items, list):
        items = [items]
    out: list[tuple[str, Any, Any]] = []
    skipped = 0
    for item in items:
        raw = polling.evaluate(id_expr, item, "id")
        if raw is None or raw == "" or isinstance(raw, bool):
            skipped += 1
            continue
        text = raw if isinstance(raw, str) else msgspec.json.encode(raw).decode()
        key = polling.evaluate(order_expr, item, "order") if order_expr is not None else None
        out.append((polling.event_id(text), item, key))
    if skipped:
        sdk.logger().warning("%d item(s) without an id were left out (field id)", skipped)
    if order_expr is None and config.listed == "newest_first":
        out.reverse()
    return out


@sdk.polling_trigger(
    "http.new_items",
    label="New items at a URL",
    config=NewItemsConfig,
    interval=300,
    min_interval=30,
    category="HTTP",
    icon="globe",
    output_example={"id": 42, "title": "An item", "updated_at": "2025-01-01T00:00:00Z"},
)
async def new_items(config: NewItemsConfig, cursor: Any) -> sdk.PollResult:
    """GET a JSON URL and start one run per new item (the item is the run input).

    Each item's run has the event id of the item's ``id`` expression (texts longer than
    200 characters become ``sha256:<hex>``), so an item starts one run however often it
    is seen. Runs start oldest first. Cursor: ``{"seen": [ids]}`` (mode ``seen_ids``) or
    ``{"after": <greatest order value>}`` (mode ``newest``).

    Raises :class:`~connectors.sdk.ConfigError` (field in ``details``) for an invalid
    JSONata expression, a retryable ``ActionError`` for 429/5xx (with ``retry_after``
    from ``Retry-After``), timeouts, refused connections and answers that are not JSON,
    and ``NonRetryableError`` for other 4xx answers.
    """
    headers = dict(config.headers)
    params = query_params(config.query)
    if config.credential:
        apply_auth(sdk.credential("credential"), headers, params)
    if config.mode == "newest" and not config.order.strip():
        raise sdk.ConfigError(
            "order: mode Newest needs an Order expression", details={"field": "order"}
        )
    response = await polling.fetch(
        config.url, headers, params, config.request_timeout, service="New items"
    )
    try:
        body = msgspec.json.decode(response.content)
    except msgspec.DecodeError:
        raise sdk.ActionError(
            f"the answer of {config.url} is not JSON", kind="http_invalid_json"
        ) from None
    found = _item_ids(config, body)
    if config.mode == "newest":
        fresh, next_cursor = polling.newer_than(found, cursor)
    else:
        if config.order.strip():
            found = polling.by_key(found)
        pairs = [(item_id, item) for item_id, item, _key in found]
        fresh, next_cursor = polling.new_since(pairs, cursor, config.keep_ids)
    events = [sdk.TriggerEvent(id=i, data=item, meta={"item_id": i}) for i, item in fresh]
    return sdk.PollResult(events=events, cursor=next_cursor)
