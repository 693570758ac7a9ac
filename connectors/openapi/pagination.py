"""Which operations page their results, and how (see :class:`~.definition.Pagination`).

An operation pages when its document says so, read in this order:

1. the extension ``x-railyard-pagination`` on the operation (``kind``, ``items``,
   ``param``, ``next``, ``has_more``, ``size_param``; paths as dotted text), for
   documents whose pagination the rules below do not read;
2. ``link``: the success response declares a ``Link`` header (GitHub);
3. ``cursor``: a query parameter named in :data:`CURSOR_PARAMS` and, in the response,
   a next-cursor field named in :data:`NEXT_FIELDS` (at the top level or one object
   down), or Stripe's list shape (``starting_after`` / ``has_more`` / ``data``: the next
   cursor is the last item's ``id``);
4. ``page``: an integer query parameter ``page`` (with ``per_page``, ``page_size``,
   ``pageSize`` or ``limit`` as the page size when declared).

In every case the response must hold an array: the body itself, or the property named
``data``, ``items``, ``results``, ``records`` or the only array property.
"""

from __future__ import annotations

from typing import Any

from .definition import FieldSpec, Pagination

CURSOR_PARAMS = (
    "cursor",
    "after",
    "starting_after",
    "start_cursor",
    "page_token",
    "pageToken",
    "next_token",
    "offset",
)
NEXT_FIELDS = (
    "next_cursor",
    "nextCursor",
    "next_page_token",
    "nextPageToken",
    "next_token",
    "offset",
    "cursor",
)
ITEM_FIELDS = ("data", "items", "results", "records", "values")
SIZE_PARAMS = ("per_page", "page_size", "pageSize", "limit")


def items_path(schema: dict[str, Any]) -> list[str] | None:
    """Where the array of a page is in a response of ``schema``, or ``None``."""
    if schema.get("type") == "array":
        return []
    props = schema.get("properties") or {}
    arrays = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "array"]
    for name in ITEM_FIELDS:
        if name in arrays:
            return [name]
    return [arrays[0]] if len(arrays) == 1 else None


def _next_field(schema: dict[str, Any]) -> list[str] | None:
    props = schema.get("properties") or {}
    for name in NEXT_FIELDS:
        if name in props:
            return [name]
    for outer, sub in props.items():
        if isinstance(sub, dict):
            for name in NEXT_FIELDS:
                if name in (sub.get("properties") or {}):
                    return [outer, name]
    return None


def _path(text: Any) -> list[str]:
    return [p for p in str(text or "").split(".") if p]


def detect(
    operation: dict[str, Any],
    fields: list[FieldSpec],
    output_schema: dict[str, Any],
    headers: dict[str, Any],
) -> Pagination | None:
    """The pagination of an operation (its raw object, its fields, its converted success
    schema and that response's declared headers), or ``None``."""
    declared = operation.get("x-railyard-pagination")
    if isinstance(declared, dict) and declared.get("kind") in ("cursor", "page", "link"):
        return Pagination(
            kind=declared["kind"],
            items_path=_path(declared.get("items")),
            param=str(declared.get("param") or ""),
            next_path=_path(declared.get("next")),
            has_more_path=_path(declared.get("has_more")),
            size_param=str(declared.get("size_param") or ""),
        )
    items = items_path(output_schema)
    if items is None:
        return None
    query = {f.wire_name: f for f in fields if f.location == "query"}
    size = next((n for n in SIZE_PARAMS if n in query), "")
    if any(name.lower() == "link" for name in headers):
        return Pagination(kind="link", items_path=items, size_param=size)
    cursor = next((n for n in CURSOR_PARAMS if n in query), "")
    if cursor:
        props = output_schema.get("properties") or {}
        if cursor == "starting_after" and "has_more" in props:
            return Pagination(
                kind="cursor",
                items_path=items,
                param=cursor,
                has_more_path=["has_more"],
                size_param=size,
            )
        nxt = _next_field(output_schema)
        if nxt is not None:
            more = ["has_more"] if "has_more" in props else []
            return Pagination(
                kind="cursor",
                items_path=items,
                param=cursor,
                next_path=nxt,
                has_more_path=more,
                size_param=size,
            )
    page = query.get("page")
    if page is not None and page.schema.get("type") in ("integer", "number"):
        return Pagination(kind="page", items_path=items, param="page", size_param=size)
    return None
