"""Which operations page their results, and how (see :class:`~.definition.Pagination`).

An operation pages when its document says so, read in this order:

1. the extension ``x-railyard-pagination`` on the operation (``kind``, ``items``,
   ``param``, ``in`` (``query`` or ``body``), ``next``, ``has_more``, ``total``,
   ``is_last``, ``size_param``; paths as dotted text), for documents whose pagination
   the rules below do not read;
2. ``link``: the success response declares a ``Link`` header (GitHub);
3. ``cursor``: a query parameter named in :data:`CURSOR_PARAMS` and, in the response,
   a next-cursor field named in :data:`NEXT_FIELDS` (at the top level or one object
   down), or Stripe's list shape (``starting_after`` / ``has_more`` / ``data``: the next
   cursor is the last item's ``id``); the cursor parameter is text (a number is an
   offset); failing a query parameter, a property of that
   name in a JSON request body (Notion's ``start_cursor`` with ``next_cursor`` and
   ``has_more``);
4. ``offset``: a numeric query (or JSON body) parameter named in :data:`OFFSET_PARAMS`
   (Jira's ``startAt``), the response's ``total`` (or ``isLast``) read when declared;
5. ``page``: an integer query parameter ``page``.

The page size, when declared, is the parameter named in :data:`SIZE_PARAMS` (Jira's
``maxResults``, GitHub's ``per_page``, ...).

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
SIZE_PARAMS = ("per_page", "page_size", "pageSize", "limit", "maxResults", "max_results")
OFFSET_PARAMS = ("startAt", "start_at", "offset", "skip", "start")
TOTAL_FIELDS = ("total", "totalCount", "total_count", "totalSize")
LAST_FIELDS = ("isLast", "is_last", "last")


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


NUMBERS = ("integer", "number")


def _typed(field: FieldSpec, types: tuple[str, ...]) -> bool:
    """``field``'s schema has one of ``types`` (or no type at all)."""
    kind = field.schema.get("type")
    if isinstance(kind, list):
        return any(k in types for k in kind)
    return kind is None or kind in types


def _first(names: tuple[str, ...], props: dict[str, Any], kind: str) -> list[str]:
    for name in names:
        if (props.get(name) or {}).get("type") == kind:
            return [name]
    return []


def _declared(declared: dict[str, Any]) -> Pagination:
    return Pagination(
        kind=declared["kind"],
        items_path=_path(declared.get("items")),
        param=str(declared.get("param") or ""),
        param_in="body" if declared.get("in") == "body" else "query",
        next_path=_path(declared.get("next")),
        has_more_path=_path(declared.get("has_more")),
        total_path=_path(declared.get("total")),
        last_path=_path(declared.get("is_last")),
        size_param=str(declared.get("size_param") or ""),
    )


def _cursor(
    cursor: str, where: str, items: list[str], output_schema: dict[str, Any], size: str
) -> Pagination | None:
    props = output_schema.get("properties") or {}
    if cursor == "starting_after" and "has_more" in props:
        return Pagination(
            kind="cursor",
            items_path=items,
            param=cursor,
            param_in=where,  # type: ignore[arg-type]
            has_more_path=["has_more"],
            size_param=size,
        )
    nxt = _next_field(output_schema)
    if nxt is None:
        return None
    return Pagination(
        kind="cursor",
        items_path=items,
        param=cursor,
        param_in=where,  # type: ignore[arg-type]
        next_path=nxt,
        has_more_path=["has_more"] if "has_more" in props else [],
        size_param=size,
    )


def detect(
    operation: dict[str, Any],
    fields: list[FieldSpec],
    output_schema: dict[str, Any],
    headers: dict[str, Any],
    body_media_type: str = "",
) -> Pagination | None:
    """The pagination of an operation (its raw object, its fields, its converted success
    schema, that response's declared headers and its request body's media type), or
    ``None``."""
    declared = operation.get("x-railyard-pagination")
    if isinstance(declared, dict) and declared.get("kind") in ("cursor", "page", "offset", "link"):
        return _declared(declared)
    items = items_path(output_schema)
    if items is None:
        return None
    query = {f.wire_name: f for f in fields if f.location == "query"}
    json_body = "json" in body_media_type.split(";")[0]
    body = {f.wire_name: f for f in fields if f.location == "body" and json_body}
    places = (("query", query), ("body", body))
    size = next((n for _, named in places for n in SIZE_PARAMS if n in named), "")
    if any(name.lower() == "link" for name in headers):
        return Pagination(kind="link", items_path=items, size_param=size)
    for where, named in places:
        cursor = next(
            (n for n in CURSOR_PARAMS if n in named and _typed(named[n], ("string",))), ""
        )
        found = _cursor(cursor, where, items, output_schema, size) if cursor else None
        if found is not None:
            return found
    props = output_schema.get("properties") or {}
    for where, named in places:
        offset = next((n for n in OFFSET_PARAMS if n in named and _typed(named[n], NUMBERS)), "")
        if offset:
            return Pagination(
                kind="offset",
                items_path=items,
                param=offset,
                param_in=where,  # type: ignore[arg-type]
                total_path=_first(TOTAL_FIELDS, props, "integer"),
                last_path=_first(LAST_FIELDS, props, "boolean"),
                size_param=size,
            )
    page = query.get("page")
    if page is not None and page.schema.get("type") in ("integer", "number"):
        return Pagination(kind="page", items_path=items, param="page", size_param=size)
    return None
