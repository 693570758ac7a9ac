"""Built-in HTTP connector: one action, ``http.request``.

Output shape::

    {"status": 200, "headers": {"content-type": "application/json"}, "body": {...}}

``headers`` names are lower-cased (repeated headers are joined with ``", "``); ``body`` is
the parsed JSON when the response's content type is JSON (``application/json`` or
``+json``), else the text (``None`` for an empty body or a HEAD request).

Errors: status >= 400 with ``fail_on_error_status`` raises through
:func:`connectors.sdk.raise_for_status` (429/503 retryable honouring ``Retry-After``,
other 5xx retryable, 4xx not); a timeout raises a retryable ``ActionError`` of kind
``http_timeout``, any other transport failure kind ``http_transport``; SSRF refusals
(kind ``ssrf_blocked``) are not retryable.

Non-GET requests carry ``Idempotency-Key: <sdk.info().idempotency_key>`` unless the user
set that header (any case) themselves, so APIs that deduplicate see retries as one call.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import httpx
import msgspec

from connectors import sdk

__all__ = ["HttpRequestConfig", "HttpResponse", "connector", "http_request"]

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})


class HttpRequestConfig(msgspec.Struct, kw_only=True):
    """Config of ``http.request``."""

    method: Annotated[Method, msgspec.Meta(title="Method", description="HTTP method")] = "GET"
    url: Annotated[
        str,
        msgspec.Meta(
            title="URL",
            description="http or https URL",
            extra_json_schema={"format": "uri"},
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
    body: Annotated[
        Any,
        msgspec.Meta(
            title="Body",
            description="Sent as JSON when set and the method allows a body",
        ),
    ] = None
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


class HttpResponse(msgspec.Struct):
    """Output of ``http.request``."""

    status: int
    headers: dict[str, str]
    body: Any


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _decode_body(response: httpx.Response, method: str) -> Any:
    if method == "HEAD" or not response.content:
        return None
    if _is_json(response.headers.get("content-type", "")):
        try:
            return msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            return response.text
    return response.text


def _headers(response: httpx.Response) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


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
    """Send one HTTP request with the guarded SDK client."""
    method = config.method
    headers = dict(config.headers)
    if method != "GET" and not any(k.lower() == "idempotency-key" for k in headers):
        headers["Idempotency-Key"] = sdk.info().idempotency_key
    send_json = config.body is not None and method not in _BODYLESS
    client = sdk.http_client()
    try:
        response = await client.request(
            method,
            config.url,
            headers=headers,
            params=config.query or None,
            json=config.body if send_json else None,
            timeout=config.request_timeout,
        )
    except httpx.TimeoutException as err:
        raise sdk.ActionError(
            f"{method} {config.url} timed out after {config.request_timeout:g} s"
            f" ({type(err).__name__})",
            kind="http_timeout",
            details={"url": config.url},
        ) from None
    except httpx.InvalidURL as err:
        raise sdk.NonRetryableError(
            f"invalid URL {config.url!r}: {err}", kind="http_invalid_url"
        ) from None
    except httpx.UnsupportedProtocol as err:
        raise sdk.NonRetryableError(
            f"invalid URL {config.url!r}: {err}", kind="ssrf_blocked"
        ) from None
    except httpx.TransportError as err:
        raise sdk.ActionError(
            f"{method} {config.url} failed: {type(err).__name__}: {err}".rstrip(": "),
            kind="http_transport",
            details={"url": config.url},
        ) from None
    if config.fail_on_error_status and response.status_code >= 400:
        sdk.raise_for_status(response)
    return HttpResponse(
        status=response.status_code,
        headers=_headers(response),
        body=_decode_body(response, method),
    )


connector = sdk.Connector(
    name="http",
    label="HTTP",
    version="1.0.0",
    description="Generic HTTP requests",
    actions=[http_request],
)
