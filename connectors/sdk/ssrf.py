"""Outbound HTTP guard against server-side request forgery (SSRF).

Workflows let business users type URLs, so every request a connector makes through the
SDK's client is checked *before* it leaves the worker:

- only ``http`` and ``https`` URLs;
- the host is resolved (``getaddrinfo`` through the running event loop) and every
  address it resolves to must be public. Refused by default: loopback (127/8, ::1),
  private (RFC 1918, fc00::/7, 100.64/10), link-local (169.254/16 incl. the cloud
  metadata address 169.254.169.254, fe80::/10), unspecified (0.0.0.0, ::), multicast and
  reserved ranges, and IPv4-mapped IPv6 forms of all of these;
- the check runs again when the connection is opened, against the address actually
  dialled (the connection is pinned to a checked address), so a DNS answer that changes
  between check and connect (DNS rebinding) cannot slip through. Redirects are requests
  of their own and are checked the same way;
- environment proxies are ignored (``trust_env=False``): a proxy would dial for us.

:class:`SsrfPolicy` relaxes the rules: ``allow_private=True`` turns the address check
off (development, tests), ``allowlist`` names hosts (``"crm.internal"``, or a suffix
pattern ``"*.corp.example"``), IP addresses or CIDR networks (``"10.1.0.0/16"``) that are
allowed even though they are not public.

A refused request raises :class:`~connectors.sdk.errors.NonRetryableError` with kind
``"ssrf_blocked"``. :func:`make_http_client` builds the ``httpx.AsyncClient`` the SDK
hands to actions; it also caps response bodies (kind ``"response_too_large"``).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import socket
import ssl
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import httpx

from .errors import ActionError, NonRetryableError

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT",
    "SsrfGuardTransport",
    "SsrfPolicy",
    "guarded_connection_pool",
    "make_http_client",
    "user_agent",
]

DEFAULT_TIMEOUT = 30.0
"""Default timeout of the SDK's HTTP client, in seconds (connect, read, write, pool)."""

DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024
"""Default cap on a response body, in bytes (10 MiB)."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_EXTRA_PRIVATE: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("100.64.0.0/10"),  # shared address space (carrier-grade NAT)
    ipaddress.ip_network("fc00::/7"),  # unique local addresses
)
_EXTRA_LINK_LOCAL: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),  # incl. cloud metadata 169.254.169.254
    ipaddress.ip_network("fe80::/10"),
)


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


def _blocked_reason(address: IPAddress) -> str | None:
    """Why ``address`` is refused by default, or ``None`` when it is public."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _blocked_reason(address.ipv4_mapped)
    if address.is_loopback:
        return "loopback"
    if address.is_unspecified:
        return "unspecified"
    if address.is_link_local or any(address in net for net in _EXTRA_LINK_LOCAL):
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_private or any(address in net for net in _EXTRA_PRIVATE):
        return "private"
    if address.is_reserved:
        return "reserved"
    if not address.is_global:
        return "non-public"
    return None


@dataclass(frozen=True)
class SsrfPolicy:
    """Which destinations outbound requests may reach.

    Attributes:
        allow_private: when true, any resolved address is allowed (only the scheme is
            checked). For development and tests only.
        allowlist: hosts (exact, case-insensitive; ``"*.example.com"`` matches
            subdomains), IP addresses or CIDR networks that are allowed even when they
            are not public.
    """

    allow_private: bool = False
    allowlist: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        hosts: list[str] = []
        networks: list[IPNetwork] = []
        for entry in self.allowlist:
            entry = entry.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                hosts.append(entry.lower().rstrip("."))
        object.__setattr__(self, "_hosts", tuple(hosts))
        object.__setattr__(self, "_networks", tuple(networks))

    def host_allowlisted(self, host: str) -> bool:
        """True when ``host`` (a name) is in the allowlist by name or suffix pattern."""
        name = host.lower().rstrip(".")
        for entry in self._hosts:  # type: ignore[attr-defined]
            if entry.startswith("*."):
                if name.endswith(entry[1:]):
                    return True
            elif name == entry:
                return True
        return False

    def address_allowed(self, address: IPAddress) -> bool:
        """True when ``address`` may be dialled under this policy."""
        if self.allow_private:
            return True
        if any(address in net for net in self._networks):  # type: ignore[attr-defined]
            return True
        return _blocked_reason(address) is None

    def check_address(self, host: str, address: IPAddress) -> None:
        """Raise ``NonRetryableError(kind="ssrf_blocked")`` unless ``address`` is allowed."""
        if self.address_allowed(address):
            return
        reason = _blocked_reason(address) or "blocked"
        shown = host if host == str(address) else f"{host} ({address})"
        raise NonRetryableError(
            f"refusing to connect to {shown}: {reason} address; outbound requests may only "
            "reach public addresses unless the host is in the SSRF allowlist",
            kind="ssrf_blocked",
            details={"host": host, "address": str(address), "reason": reason},
        )

    async def resolve_and_check(self, host: str, port: int) -> list[IPAddress]:
        """Resolve ``host`` and check every address; return the addresses in DNS order.

        Raises ``NonRetryableError`` (kind ``ssrf_blocked``) when any address is refused,
        or (kind ``dns_error``, retryable) when the name does not resolve.
        """
        host = host.strip("[]")
        try:
            literal: IPAddress | None = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            self.check_address(host, literal)
            return [literal]
        allowed_by_name = self.allow_private or self.host_allowlisted(host)
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as err:
            raise ActionError(
                f"cannot resolve host {host!r}: {err}", kind="dns_error", retryable=True
            ) from None
        addresses: list[IPAddress] = []
        for _family, _type, _proto, _canon, sockaddr in infos:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
        if not allowed_by_name:
            for address in addresses:
                self.check_address(host, address)
        return addresses


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
