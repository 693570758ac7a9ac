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
``"ssrf_blocked"``. This module holds the policy, which connectors dialling another
protocol check themselves (``await sdk.current_context().ssrf.resolve_and_check(host,
port)``, as the SMTP connector does); the guarded HTTP client that enforces it on every
request ``sdk.http_client()`` returns is built by the host (:mod:`connectors.host.outbound`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

from .errors import ActionError, NonRetryableError

__all__ = ["IPAddress", "SsrfPolicy"]

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
