"""Shared by the built-in polling triggers (``http.new_items``, ``rss.new_item``): which
items are new against a bounded list of seen ids, event ids that fit the product's
limit, JSONata compiled with a time budget, and HTTP errors that keep ``Retry-After``.

The cursor of a "seen ids" trigger is ``{"seen": [id, ...]}`` (oldest first): the ids of
the items the last polls returned, at most ``max(keep, items in the last answer)`` of
them, so every item still in the answer stays known however long the answer is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Annotated, Any

import httpx
import jsonata
import msgspec

from connectors import sdk
from connectors.sdk.triggers import MAX_EVENT_ID

__all__ = [
    "DEFAULT_KEEP",
    "JSONATA_TIMEOUT_MS",
    "KeepIds",
    "RequestTimeout",
    "by_key",
    "compile_jsonata",
    "evaluate",
    "event_id",
    "fetch",
    "new_since",
    "newer_than",
]

DEFAULT_KEEP = 1000
"""Seen ids a cursor keeps by default (more when one answer holds more items)."""

JSONATA_TIMEOUT_MS = 2000
"""Budget of one poll's JSONata evaluations, in milliseconds (error D1012 past it)."""

_JSONATA_STACK = 500

KeepIds = Annotated[
    int,
    msgspec.Meta(
        title="Ids remembered",
        description="Seen ids kept between polls (at least the items of one answer)",
        ge=1,
        le=100_000,
    ),
]
"""A config field: how many seen ids the cursor keeps (default :data:`DEFAULT_KEEP`)."""

RequestTimeout = Annotated[float, msgspec.Meta(title="Request timeout (s)", gt=0)]
"""A config field: seconds one poll's request may take."""


def event_id(raw: str) -> str:
    """``raw`` as an event id: unchanged when it has 1 to 200 characters, else
    ``"sha256:<hex>"`` of it (the same id every time). Raises ``ValueError`` for ``""``."""
    if not raw:
        raise ValueError("an event id cannot be empty")
    if len(raw) <= MAX_EVENT_ID:
        return raw
    return "sha256:" + hashlib.sha256(raw.encode()).hexdigest()


def compile_jsonata(expression: str, field: str) -> jsonata.Jsonata:
    """Compile ``expression`` (a leading ``=`` is dropped) with a time budget of
    :data:`JSONATA_TIMEOUT_MS` from now on; raises :class:`~connectors.sdk.ConfigError`
    naming ``field`` when it is empty or not valid JSONata."""
    source = expression.strip().removeprefix("=").strip()
    if not source:
        raise sdk.ConfigError(
            f"{field}: a JSONata expression is required", details={"field": field}
        )
    try:
        return jsonata.Jsonata(source, timeout=JSONATA_TIMEOUT_MS, stack=_JSONATA_STACK)
    except Exception as err:  # jsonata raises JException (a RuntimeError) and others
        raise sdk.ConfigError(
            f"{field}: not a valid JSONata expression: {err}", details={"field": field}
        ) from None


def evaluate(expression: jsonata.Jsonata, data: Any, field: str) -> Any:
    """``expression`` evaluated on ``data``, as plain JSON values (``None`` when
    undefined). Raises a retryable :class:`~connectors.sdk.ActionError` (kind
    ``expression_error``) naming ``field`` when the evaluation fails on this data."""
    try:
        result = expression.evaluate(data)
    except Exception as err:
        raise sdk.ActionError(
            f"{field}: evaluating the expression failed: {err}",
            kind="expression_error",
            details={"field": field},
        ) from None
    return msgspec.to_builtins(result) if result is not None else None


def new_since(
    items: Sequence[tuple[str, Any]], cursor: Any, keep: int = DEFAULT_KEEP
) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    """The items of ``items`` (``(id, item)`` pairs, oldest first) whose id is not in the
    ``cursor``'s seen ids, oldest first, each id once; and the next cursor
    ``{"seen": [...]}`` (see the module doc). A ``cursor`` that is not such an object
    counts as empty."""
    seen_before: list[str] = []
    if isinstance(cursor, dict) and isinstance(cursor.get("seen"), list):
        seen_before = [str(s) for s in cursor["seen"]]
    known = set(seen_before)
    fresh: list[tuple[str, Any]] = []
    current: list[str] = []
    in_answer: set[str] = set()
    for item_id, item in items:
        if item_id in in_answer:
            continue
        in_answer.add(item_id)
        current.append(item_id)
        if item_id not in known:
            fresh.append((item_id, item))
    older = [s for s in seen_before if s not in in_answer]
    bound = max(keep, len(current))
    return fresh, {"seen": (older + current)[-bound:]}


def by_key(items: Iterable[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """``items`` (``(id, item, key)`` triples) ordered by ``key``, oldest first; items
    without a key (not a number or a string) come first, in their order. Raises a
    retryable :class:`~connectors.sdk.ActionError` (kind ``mixed_keys``) when numbers and
    strings meet."""
    listed = list(items)
    keyless = [t for t in listed if not isinstance(t[2], int | float | str)]
    keyed = [t for t in listed if isinstance(t[2], int | float | str)]
    try:
        keyed.sort(key=lambda t: t[2])
    except TypeError:
        raise sdk.ActionError(
            "the order expression gives values of different types (numbers and text)",
            kind="mixed_keys",
        ) from None
    return keyless + keyed


def newer_than(
    items: Iterable[tuple[str, Any, Any]], cursor: Any
) -> tuple[list[tuple[str, Any]], dict[str, Any] | None]:
    """The items of ``items`` (``(id, item, key)`` triples) whose ``key`` (a number or a
    string, e.g. an ISO 8601 time) is greater than the cursor's ``{"after": key}``,
    ordered by key, oldest first; and the next cursor (``None`` when nothing is newer:
    keep the stored one). Items without a key are left out; an item whose key equals the
    cursor's counts as seen. Raises as :func:`by_key` does, also when the cursor's key
    and the items' keys have different types."""
    after = cursor.get("after") if isinstance(cursor, dict) else None
    keyed = [t for t in by_key(items) if isinstance(t[2], int | float | str)]
    try:
        fresh = [(i, item) for i, item, k in keyed if after is None or k > after]
    except TypeError:
        raise sdk.ActionError(
            "the order values changed type since the last poll (numbers and text)",
            kind="mixed_keys",
        ) from None
    if not fresh:
        return [], None
    return fresh, {"after": keyed[-1][2]}


async def fetch(
    url: str, headers: dict[str, str], params: list[tuple[str, str]], timeout: float, service: str
) -> httpx.Response:
    """GET ``url`` through the SDK's client. 304 is returned as is; any status >= 400
    raises as :func:`connectors.sdk.raise_for_status` does, and a retryable error also
    carries the ``Retry-After`` of any 5xx answer (not only 429 and 503). Transport
    failures raise as :func:`connectors.sdk.http_errors` maps them."""
    client = sdk.http_client()
    with sdk.http_errors(url, method="GET", service=service, timeout=timeout):
        response = await client.get(url, headers=headers, params=tuple(params), timeout=timeout)
    try:
        sdk.raise_for_status(response)
    except sdk.ActionError as err:
        if err.retryable and err.retry_after is None:
            err.retry_after = sdk.parse_retry_after(response.headers.get("retry-after"))
        raise
    return response
