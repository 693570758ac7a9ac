"""Following an operation's pages at run time (what **Fetch all pages** does).

:func:`fetch_all` starts from the first page's request and response and asks for the
next page the way the operation's :class:`~.definition.Pagination` says, until the
pagination says there is no more or ``cap`` pages were fetched. Every page's items are
put together at the page's ``items_path`` in the last response, so the output keeps the
shape of one page.

Raises ``sdk.NonRetryableError`` (kind ``pagination_foreign_link``) when a ``Link`` header
points to another server than the first request's: the credential is not sent there;
(kind ``pagination_body``) when a document's ``x-railyard-pagination`` puts the parameter
in a body that is not JSON (a form).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from connectors import sdk

from .definition import OperationSpec, Pagination
from .requests import Request

LINK_NEXT = re.compile(r'<([^>]+)>\s*;[^,]*rel="?next"?', re.IGNORECASE)

Send = Callable[[Request], Awaitable[tuple[httpx.Response, Any]]]
"""Sends a request and returns the response with its decoded body."""


def at(data: Any, path: list[str]) -> Any:
    """The value at ``path`` (keys) in ``data``, or ``None``."""
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def put(data: Any, path: list[str], value: Any) -> Any:
    """``data`` with ``value`` at ``path`` (a copy of the objects on the way)."""
    if not path:
        return value
    if isinstance(data, dict):
        return {**data, path[0]: put(data.get(path[0]), path[1:], value)}
    return data


def config_value(op: OperationSpec, config: dict[str, Any], wire_name: str, where: str) -> Any:
    """The config value of the field sent as ``wire_name`` in ``where`` (``query`` or
    ``body``), or ``None``."""
    location = "body" if where == "body" else "query"
    field = next(
        (f for f in op.fields if f.wire_name == wire_name and f.location == location), None
    )
    return config.get(field.name) if field is not None else None


def _size(op: OperationSpec, paging: Pagination, config: dict[str, Any]) -> int | None:
    if not paging.size_param:
        return None
    size = config_value(op, config, paging.size_param, "query")
    if size is None:
        size = config_value(op, config, paging.size_param, "body")
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def set_param(request: Request, paging: Pagination, value: Any) -> None:
    """Send ``paging.param`` = ``value`` in the query or the JSON body of ``request``."""
    if paging.param_in == "body":
        if request.content is not None or request.files is not None:
            raise sdk.NonRetryableError(
                f"the pagination parameter {paging.param} is declared in the body, which "
                "is not a JSON object here; only JSON bodies carry it",
                kind="pagination_body",
            )
        body = request.json if isinstance(request.json, dict) else {}
        request.json = {**body, paging.param: value}
        return
    request.params = [(k, v) for k, v in request.params if k != paging.param]
    request.params.append((paging.param, str(value)))


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


async def fetch_all(
    op: OperationSpec,
    paging: Pagination,
    config: dict[str, Any],
    request: Request,
    first: tuple[httpx.Response, Any],
    send: Send,
    cap: int,
) -> Any:
    """Every page's items in the shape of one page (see the module docstring)."""
    response, data = first
    items = list(at(data, paging.items_path) or [])
    page_items = items
    size = _size(op, paging, config)
    start = _int(config_value(op, config, paging.param, paging.param_in))
    page = start or 1
    offset = start or 0
    origin = httpx.URL(request.url)
    pages = 1
    while pages < cap and page_items:
        if paging.kind == "link":
            found = LINK_NEXT.search(response.headers.get("link", ""))
            if found is None:
                break
            following = httpx.URL(found.group(1))
            if (following.scheme, following.host, following.port) != (
                origin.scheme,
                origin.host,
                origin.port,
            ):
                raise sdk.NonRetryableError(
                    f"the next page link points to another server ({following.host}); "
                    "the credential is not sent there",
                    kind="pagination_foreign_link",
                )
            request.url, request.params = str(following), []
        elif paging.kind == "cursor":
            if paging.has_more_path and not at(data, paging.has_more_path):
                break
            cursor = at(data, paging.next_path) if paging.next_path else None
            if not paging.next_path and isinstance(page_items[-1], dict):
                cursor = page_items[-1].get("id")
            if cursor in (None, ""):
                break
            set_param(request, paging, cursor if paging.param_in == "body" else str(cursor))
        elif paging.kind == "offset":
            offset += len(page_items)
            total = _int(at(data, paging.total_path)) if paging.total_path else None
            if total is not None:
                if offset >= total:
                    break
            elif paging.last_path and at(data, paging.last_path) is not None:
                if at(data, paging.last_path):
                    break
            elif size is not None and len(page_items) < size:
                break
            set_param(request, paging, offset)
        else:
            if size is not None and len(page_items) < size:
                break
            page += 1
            set_param(request, paging, page)
        response, data = await send(request)
        page_items = list(at(data, paging.items_path) or [])
        items += page_items
        pages += 1
    if pages >= cap and page_items:
        sdk.logger().warning("%s: stopped after %d pages (the cap); more may follow", op.key, cap)
    return put(data, paging.items_path, items)
