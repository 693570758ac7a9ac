"""Built-in HTTP connector: ``http.request`` and the generic auth credential types.

Output shape::

    {"status": 200, "headers": {"content-type": "application/json"}, "body": {...}}

plus ``"url"`` (the final URL after redirects) and, with pagination, ``"pages"`` (every
page's body, in order; ``body`` is then the last page's body).

- ``headers`` names are lower-cased (repeated headers joined with ``", "``).
- ``response_format``: ``auto`` parses JSON when the content type is JSON (``application/
  json`` or ``+json``) and returns text otherwise (``None`` for an empty body or HEAD);
  ``json`` always parses (a non-JSON body fails the step, kind ``http_invalid_json``);
  ``text`` decodes; ``bytes`` returns ``{"base64": "...", "size": n, "content_type": ...}``.
- Request bodies (``body_type``): ``json`` (any JSON value), ``form``
  (``application/x-www-form-urlencoded`` from an object; list values repeat the key),
  ``multipart`` (an object; a value ``{"filename", "content_base64", "content_type"}`` is a
  file part, anything else a text field), ``raw`` (a string sent as is with
  ``content_type``). GET/HEAD/OPTIONS send no body.
- Auth (``credential``): ``basic`` (RFC 7617), ``bearer`` (``Authorization: Bearer``),
  ``api_key`` (header or query parameter) or ``oauth2`` (the stored access token, refreshed
  by the product before expiry). The ``Authorization`` header is dropped when a redirect
  leaves the original host.
- Redirects: followed when ``follow_redirects`` (at most ``max_redirects`` hops; more fail
  with kind ``too_many_redirects``). Every hop is a request of its own through the
  SSRF-guarded client, so a redirect to a private address is refused. 301/302/303 turn a
  non-GET into a GET without body (as browsers do); 307/308 repeat method and body.
- Pagination (``pagination``): ``link_header`` follows ``Link: <url>; rel="next"``
  (RFC 8288); ``body_field`` follows the URL at a dotted path of the JSON body (e.g.
  ``paging.next.link``); stops when there is no next URL or after ``max_pages`` pages.
- Response size: each body is capped by the SDK client (10 MiB, kind
  ``response_too_large``).

Errors: status >= 400 with ``fail_on_error_status`` raises through
:func:`connectors.sdk.raise_for_status` (429/503 retryable honouring ``Retry-After``,
other 5xx retryable, 4xx not); a timeout raises a retryable ``ActionError`` of kind
``http_timeout``, any other transport failure kind ``http_transport``; SSRF refusals
(kind ``ssrf_blocked``) are not retryable.

Non-GET requests carry ``Idempotency-Key: <sdk.info().idempotency_key>`` unless the user
set that header (any case) themselves, so APIs that deduplicate see retries as one call.

The polling trigger ``http.new_items`` ("New items at a URL") lives in
:mod:`connectors.builtin.http_items`; the credential types and how a request carries them
in :mod:`connectors.builtin.http_auth` (both re-exported here).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

import httpx
import msgspec

from connectors import sdk
from connectors.builtin.http_auth import (
    API_KEY,
    AUTH_TYPES,
    BASIC,
    BEARER,
    OAUTH2,
    AuthCredential,
    apply_auth,
    query_params,
)
from connectors.builtin.http_items import NewItemsConfig, new_items

__all__ = [
    "API_KEY",
    "AUTH_TYPES",
    "BASIC",
    "BEARER",
    "OAUTH2",
    "HttpRequestConfig",
    "HttpResponse",
    "NewItemsConfig",
    "apply_auth",
    "connector",
    "http_request",
    "new_items",
]

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class HttpRequestConfig(msgspec.Struct, kw_only=True):
    """Config of ``http.request``."""

    method: Annotated[Method, msgspec.Meta(title="Method", description="HTTP method")] = "GET"
    url: Annotated[
        str,
        msgspec.Meta(
            title="URL", description="http or https URL", extra_json_schema={"format": "uri"}
        ),
    ]
    headers: Annotated[
        dict[str, str], msgspec.Meta(title="Headers", description="Request headers")
    ] = {}
    query: Annotated[
        dict[str, str | list[str]],
        msgspec.Meta(
            title="Query parameters",
            description="Appended to the URL; a list repeats the parameter",
        ),
    ] = {}
    body_type: Annotated[
        Literal["json", "form", "multipart", "raw"],
        msgspec.Meta(
            title="Body type",
            description="How the body is encoded",
            extra_json_schema={
                "x-enum-labels": {
                    "json": "JSON",
                    "form": "Form (URL-encoded)",
                    "multipart": "Multipart form",
                    "raw": "Raw",
                }
            },
        ),
    ] = "json"
    body: Annotated[
        Any,
        msgspec.Meta(title="Body", description="Sent when set and the method allows a body"),
    ] = None
    content_type: Annotated[
        str, msgspec.Meta(title="Raw content type", description="Content-Type of a raw body")
    ] = "text/plain; charset=utf-8"
    credential: AuthCredential = None
    response_format: Annotated[
        Literal["auto", "json", "text", "bytes"],
        msgspec.Meta(
            title="Response format",
            extra_json_schema={
                "x-enum-labels": {
                    "auto": "Automatic (by Content-Type)",
                    "json": "JSON",
                    "text": "Text",
                    "bytes": "Binary (base64)",
                }
            },
        ),
    ] = "auto"
    follow_redirects: Annotated[bool, msgspec.Meta(title="Follow redirects")] = True
    max_redirects: Annotated[int, msgspec.Meta(title="Max redirects", ge=0, le=20)] = 5
    pagination: Annotated[
        Literal["none", "link_header", "body_field"],
        msgspec.Meta(
            title="Pagination",
            description="How to find the next page",
            extra_json_schema={
                "x-enum-labels": {
                    "none": "None",
                    "link_header": "Link header",
                    "body_field": "Next-URL field in the body",
                }
            },
        ),
    ] = "none"
    next_field: Annotated[
        str,
        msgspec.Meta(
            title="Next-URL field", description="Dotted path of the next URL in the JSON body"
        ),
    ] = ""
    max_pages: Annotated[int, msgspec.Meta(title="Max pages", ge=1, le=1000)] = 10
    request_timeout: Annotated[
        float,
        msgspec.Meta(
            title="Request timeout (s)",
            description="Seconds to wait for the server (the node's step timeout is separate)",
            gt=0,
        ),
    ] = 30.0
    fail_on_error_status: Annotated[
        bool,
        msgspec.Meta(
            title="Fail on error status",
            description="Fail the step when the status is 400 or higher",
        ),
    ] = True


class HttpResponse(msgspec.Struct, omit_defaults=True):
    """The last response: `status`, `headers` (lower-cased names, repeats joined with
    `, `), the decoded `body` (JSON, text, or `{base64, size, content_type}` per Response
    format; `null` when empty), the final `url` (after redirects and pages) and, with
    pagination, `pages`: every page's body in order."""

    status: int
    headers: dict[str, str]
    body: Any
    url: str
    pages: list[Any] | None = None


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def decode_body(response: httpx.Response, method: str, fmt: str = "auto") -> Any:
    """Decode ``response`` per ``fmt`` (see the module docstring)."""
    if method == "HEAD":
        return None
    if fmt == "bytes":
        return {
            "base64": base64.b64encode(response.content).decode(),
            "size": len(response.content),
            "content_type": response.headers.get("content-type", ""),
        }
    if not response.content:
        return None
    if fmt == "text":
        return response.text
    if fmt == "json" or _is_json(response.headers.get("content-type", "")):
        try:
            return msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            if fmt == "json":
                raise sdk.NonRetryableError(
                    f"response from {response.request.url} is not JSON",
                    kind="http_invalid_json",
                ) from None
            return response.text
    return response.text


def _headers(response: httpx.Response) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def _body_kwargs(config: HttpRequestConfig) -> dict[str, Any]:
    if config.body is None or config.method in _BODYLESS:
        return {}
    if config.body_type == "json":
        return {"json": config.body}
    if config.body_type == "raw":
        content = config.body if isinstance(config.body, str | bytes) else str(config.body)
        return {"content": content, "headers": {"Content-Type": config.content_type}}
    if not isinstance(config.body, dict):
        raise sdk.ConfigError(f"a {config.body_type} body must be an object of fields")
    if config.body_type == "form":
        return {"data": {k: v if isinstance(v, list) else str(v) for k, v in config.body.items()}}
    # Every part goes through ``files`` so the body is multipart even without a file;
    # a ``None`` filename makes a plain form field.
    parts: list[tuple[str, tuple[str | None, bytes, str | None]]] = []
    for key, value in config.body.items():
        if isinstance(value, dict) and "content_base64" in value:
            try:
                content = base64.b64decode(value["content_base64"], validate=True)
            except ValueError:
                raise sdk.ConfigError(f"multipart field {key!r}: invalid base64") from None
            filename = str(value.get("filename") or key)
            ctype = str(value.get("content_type") or "application/octet-stream")
            parts.append((key, (filename, content, ctype)))
        else:
            text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
            parts.append((key, (None, text.encode(), None)))
    return {"files": parts}


def _dotted(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


async def _send(
    client: httpx.AsyncClient,
    config: HttpRequestConfig,
    method: str,
    url: str,
    headers: dict[str, str],
    params: list[tuple[str, str]] | None,
    body: dict[str, Any],
) -> httpx.Response:
    """One logical request, following redirects hop by hop (each hop SSRF-checked)."""
    origin = httpx.URL(url).host
    for _hop in range(config.max_redirects + 1):
        extra_headers = body.get("headers", {})
        kwargs = {k: v for k, v in body.items() if k != "headers"}
        try:
            with sdk.http_errors(url, method=method, timeout=config.request_timeout):
                response = await client.request(
                    method,
                    url,
                    headers={**headers, **extra_headers},
                    params=params,  # type: ignore[arg-type]
                    timeout=config.request_timeout,
                    follow_redirects=False,
                    **kwargs,
                )
        except httpx.InvalidURL as err:
            raise sdk.NonRetryableError(
                f"invalid URL {url!r}: {err}", kind="http_invalid_url"
            ) from None
        location = response.headers.get("location")
        if not (config.follow_redirects and response.status_code in _REDIRECTS and location):
            return response
        await response.aclose()
        next_url = response.request.url.join(location)
        url, params = str(next_url), None
        if response.status_code in (301, 302, 303) and method not in ("GET", "HEAD"):
            method, body = "GET", {}
        if next_url.host != origin:
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    raise sdk.NonRetryableError(
        f"more than {config.max_redirects} redirects starting at {config.url}",
        kind="too_many_redirects",
        details={"url": config.url, "max_redirects": config.max_redirects},
    )


@sdk.action(
    "http.request",
    label="HTTP Request",
    config=HttpRequestConfig,
    category="HTTP",
    icon="globe",
    description="Call any HTTP API and return its status, headers and (JSON) body.",
    expression_fields=("url", "headers", "query", "body"),
    outputs=("out",),
)
async def http_request(config: HttpRequestConfig, input: Any) -> HttpResponse:
    """Send an HTTP request (following redirects and pages as configured)."""
    method = config.method
    headers = dict(config.headers)
    if method != "GET" and not any(k.lower() == "idempotency-key" for k in headers):
        headers["Idempotency-Key"] = sdk.info().idempotency_key
    params = query_params(config.query)
    if config.credential:
        apply_auth(sdk.credential("credential"), headers, params)
    client = sdk.http_client()
    body = _body_kwargs(config)
    url = config.url
    pages: list[Any] = []
    while True:
        response = await _send(client, config, method, url, headers, params or None, body)
        if config.fail_on_error_status and response.status_code >= 400:
            sdk.raise_for_status(response)
        decoded = decode_body(response, method, config.response_format)
        pages.append(decoded)
        next_url = None
        if config.pagination == "link_header":
            link = response.links.get("next")
            next_url = link.get("url") if link else None
        elif config.pagination == "body_field" and config.next_field:
            found = _dotted(decoded, config.next_field)
            next_url = found if isinstance(found, str) and found else None
        if not next_url or len(pages) >= config.max_pages or response.status_code >= 400:
            break
        url = str(response.request.url.join(next_url))
        params = []
        sdk.heartbeat({"pages": len(pages)})
    return HttpResponse(
        status=response.status_code,
        headers=_headers(response),
        body=decoded,
        url=str(response.request.url),
        pages=pages if config.pagination != "none" else None,
    )


connector = sdk.Connector(
    name="http",
    label="HTTP",
    version="1.1.0",
    description="Generic HTTP requests and the generic API-key, basic, bearer and OAuth2 "
    "credential types",
    actions=[http_request],
    triggers=[new_items],
    credential_types=[API_KEY, BASIC, BEARER, OAUTH2],
    icon="globe",
)
