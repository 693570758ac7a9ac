"""The guarded outbound HTTP client the host hands to actions (``sdk.http_client()``).

Enforces :class:`connectors.sdk.SsrfPolicy` on every request (the rules are in
:mod:`connectors.sdk.ssrf`): the scheme and the resolved addresses are checked before a
request leaves, and again on the address actually dialled when a connection is opened
(the connection is pinned to a checked address, so DNS rebinding cannot slip through);
redirects are requests of their own; proxies from the environment are ignored; response
bodies are capped (kind ``"response_too_large"``).

:func:`guarded_connection_pool` is the keep-alive pool one process shares across
attempts; :func:`make_http_client` builds a client over it (or over a pool of its own).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import AsyncIterator, Iterable
from importlib import metadata
from typing import Any

import httpx

from connectors.sdk.errors import NonRetryableError
from connectors.sdk.ssrf import SsrfPolicy

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT",
    "SsrfGuardTransport",
    "default_ssl_context",
    "guarded_connection_pool",
    "make_http_client",
    "user_agent",
]

DEFAULT_TIMEOUT = 30.0
"""Default timeout of the actions' HTTP client, in seconds (connect, read, write, pool)."""

DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024
"""Default cap on a response body, in bytes (10 MiB)."""


@functools.cache
def user_agent() -> str:
    """``Railyard/<installed version>`` (``Railyard/dev`` when not installed).

    Cached: reading the installed metadata costs about a millisecond, once per client.
    """
    try:
        version = metadata.version("railyard")
    except metadata.PackageNotFoundError:
        version = "dev"
    return f"Railyard/{version}"


def _check_scheme(url: httpx.URL) -> None:
    if url.scheme not in ("http", "https"):
        raise NonRetryableError(
            f"refusing URL {url}: only http and https are allowed", kind="ssrf_blocked"
        )


class _GuardedNetworkBackend:
    """httpcore network backend that dials only addresses the policy allows."""

    def __init__(self, policy: SsrfPolicy, inner: Any) -> None:
        self._policy = policy
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        addresses = await self._policy.resolve_and_check(host, port)
        last: BaseException | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except Exception as err:  # try the next address, like happy eyeballs would
                last = err
        assert last is not None
        raise last

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        raise NonRetryableError("unix sockets are not allowed", kind="ssrf_blocked")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int, url: httpx.URL) -> None:
        self._inner = inner
        self._limit = limit
        self._url = url

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self._inner:
            total += len(chunk)
            if total > self._limit:
                raise NonRetryableError(
                    f"response from {self._url} exceeds {self._limit} bytes",
                    kind="response_too_large",
                    details={"limit": self._limit, "url": str(self._url)},
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class SsrfGuardTransport(httpx.AsyncBaseTransport):
    """``httpx`` transport enforcing an :class:`SsrfPolicy` and a response size cap.

    Each request is checked up front (scheme, resolved addresses) for a clear error, and
    again at connect time against the address actually dialled.
    ``max_response_bytes`` (``None`` = no cap) limits the decoded-on-the-wire body size.
    ``inner`` is the connection pool requests go through (default: a new
    :func:`guarded_connection_pool`; one passed in must do the connect-time check
    itself); ``close_inner=False`` leaves a shared pool open when this transport closes.
    """

    def __init__(
        self,
        policy: SsrfPolicy,
        *,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        inner: httpx.AsyncBaseTransport | None = None,
        close_inner: bool = True,
    ) -> None:
        self.policy = policy
        self.max_response_bytes = max_response_bytes
        self._inner = inner if inner is not None else guarded_connection_pool(policy)
        self._close_inner = close_inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _check_scheme(request.url)
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        await self.policy.resolve_and_check(request.url.host, port)
        response = await self._inner.handle_async_request(request)
        if self.max_response_bytes is not None:
            stream = response.stream
            assert isinstance(stream, httpx.AsyncByteStream)
            response.stream = _CappedStream(stream, self.max_response_bytes, request.url)
        return response

    async def aclose(self) -> None:
        """Close the inner transport unless it is shared (``close_inner=False``)."""
        if self._close_inner:
            await self._inner.aclose()


def guarded_connection_pool(
    policy: SsrfPolicy,
    *,
    max_connections: int = 100,
    max_keepalive_connections: int = 20,
    keepalive_expiry: float = 5.0,
) -> httpx.AsyncHTTPTransport:
    """An ``httpx`` connection pool that dials only addresses ``policy`` allows.

    Every new connection is checked at connect time against the address actually dialled
    (see the module docstring); idle connections are kept alive for ``keepalive_expiry``
    seconds (at most ``max_keepalive_connections`` of them, ``max_connections`` in all;
    httpx's defaults) and reused by later requests to the same origin. One pool can serve
    many :class:`SsrfGuardTransport` instances of the same policy (``inner=``,
    ``close_inner=False``) within one event loop; its owner closes it with ``aclose()``.
    """
    pool = httpx.AsyncHTTPTransport(
        verify=default_ssl_context(),
        trust_env=False,
        limits=httpx.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=keepalive_expiry,
        ),
    )
    inner_pool = getattr(pool, "_pool", None)
    backend = getattr(inner_pool, "_network_backend", None)
    if backend is None:  # an httpx/httpcore that moved its internals: refuse to run unguarded
        raise RuntimeError("cannot install the SSRF connect-time check on this httpx version")
    inner_pool._network_backend = _GuardedNetworkBackend(policy, backend)  # type: ignore[union-attr]
    return pool


@functools.lru_cache(maxsize=1)
def default_ssl_context() -> ssl.SSLContext:
    """One TLS context per process: loading the CA bundle costs ~0.1 s, so do it once."""
    return httpx.create_ssl_context()


def make_http_client(
    policy: SsrfPolicy | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    *,
    headers: dict[str, str] | None = None,
    pool: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """Build the guarded ``httpx.AsyncClient`` actions use.

    ``policy`` defaults to ``SsrfPolicy()`` (public addresses only); ``timeout`` is in
    seconds; ``max_response_bytes`` caps each response body. ``pool`` is a shared
    connection pool from :func:`guarded_connection_pool` built for the same policy (kept
    open when the client closes, so connections are reused across clients); without it
    the client gets a pool of its own. The client sends
    ``User-Agent: Railyard/<version>``, ignores proxy environment variables and does not
    follow redirects unless a request asks for it (``follow_redirects=True``), in which
    case every hop is checked. The caller closes it (``await client.aclose()``).
    """
    all_headers = {"User-Agent": user_agent()}
    if headers:
        all_headers.update(headers)
    return httpx.AsyncClient(
        transport=SsrfGuardTransport(
            policy or SsrfPolicy(),
            max_response_bytes=max_response_bytes,
            inner=pool,
            close_inner=pool is None,
        ),
        timeout=httpx.Timeout(timeout),
        headers=all_headers,
        trust_env=False,
        follow_redirects=False,
    )
