"""The one list envelope of every collection (docs/api.md, "Lists")::

    {"data": [...], "has_more": true, "next_cursor": "WyIyMDI2...", "next": "https://.../api/v1/runs?limit=2&cursor=WyIyMDI2..."}

plus ``Link: <next>; rel="next"`` (RFC 8288, as GitHub sends it) while there is more.
Stripe's ``{data, has_more}`` list object with GitHub's next link: ``next`` is the absolute
URL of the next page (the request's own URL with ``cursor`` replaced), ``next_cursor`` the
opaque cursor alone, both ``null`` on the last page.

Each collection has its own envelope type (``RunList``, ``WorkflowList``, ...: a
:class:`ListPage` with ``data``) so the OpenAPI document names a component per list.
Handlers take ``cursor: Cursor = None`` and ``limit: Limit = DEFAULT_LIMIT`` and answer
``XList(data=..., **page_links(request, slice))``; :func:`link_next` (the app's
``after_request``) adds the ``Link`` header.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypeVar
from urllib.parse import urlencode

import msgspec
from litestar import Request, Response
from litestar.params import QueryParameter

from backend.services.paging import DEFAULT_LIMIT, MAX_LIMIT, Slice, page_items

T = TypeVar("T")
E = TypeVar("E", bound="ListPage")

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "Cursor",
    "Limit",
    "ListPage",
    "link_next",
    "listed",
    "page_links",
]

Cursor = Annotated[
    str | None,
    QueryParameter(
        description="The previous page's `next_cursor` (opaque); none for the first page.",
        max_length=512,
    ),
]
Limit = Annotated[
    int,
    QueryParameter(
        ge=1,
        le=MAX_LIMIT,
        description=f"Most items on the page, 1 to {MAX_LIMIT} (400 outside).",
    ),
]


class ListPage(msgspec.Struct, kw_only=True):
    """What every list envelope holds besides ``data`` (see the module doc)."""

    has_more: bool
    next_cursor: str | None
    next: str | None


def page_links(request: Request[Any, Any, Any], page: Slice[Any]) -> dict[str, Any]:
    """``has_more``, ``next_cursor`` and ``next`` of ``page`` answered to ``request``."""
    if page.next_cursor is None:
        return {"has_more": False, "next_cursor": None, "next": None}
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
    query.append(("cursor", page.next_cursor))
    base = request.app.state.runtime.settings.base_url.rstrip("/")
    url = f"{base}{request.url.path}?{urlencode(query)}"
    return {"has_more": True, "next_cursor": page.next_cursor, "next": url}


def link_next(response: Response[Any]) -> Response[Any]:
    """``after_request``: a list answer with a next page carries ``Link: <next>;
    rel="next"``."""
    content = getattr(response, "content", None)  # ASGI answers (files) have none
    if isinstance(content, ListPage) and content.next is not None:
        response.headers["Link"] = f'<{content.next}>; rel="next"'
    return response


def listed(
    request: Request[Any, Any, Any],
    envelope: Callable[..., E],
    items: Sequence[T],
    key: Callable[[T], Sequence[Any]],
    key_type: Any,
    *,
    cursor: str | None,
    limit: int,
    descending: bool = False,
) -> E:
    """``envelope`` holding one page of ``items`` (a collection small enough to read
    whole) in the order of ``key`` (unique per item; ``key_type`` its type, e.g.
    ``tuple[str, str]``), after ``cursor``
    (:func:`backend.services.paging.page_items`)."""
    collection = str(request.scope.get("path_template") or request.url.path)
    page = page_items(
        items,
        key,
        key_type,
        collection=collection,
        cursor=cursor,
        limit=limit,
        descending=descending,
    )
    return envelope(data=page.items, **page_links(request, page))
