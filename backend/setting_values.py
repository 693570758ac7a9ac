"""Parsing and checking the values of settings that are more than one scalar (role maps,
database URLs, address lists); :mod:`backend.settings` applies them while loading."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


class SettingsError(Exception):
    """A required setting is missing or malformed."""


def check_networks(variable: str, values: Iterable[str]) -> None:
    """Check that each of ``values`` is an IP address or a CIDR (``10.0.0.0/8``,
    ``fd00::/8``; host bits may be set). Raises :class:`SettingsError` naming
    ``variable`` and the first value that is neither."""
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise SettingsError(f"{variable}: {value!r} is not an IP address or CIDR") from None


def parse_role_map(value: str) -> dict[str, str]:
    """``"rail-admins=admin, devs=editor"`` -> ``{"rail-admins": "admin", "devs": "editor"}``.

    Raises :class:`SettingsError` for a pair without ``=``.
    """
    pairs: dict[str, str] = {}
    for part in value.split(","):
        if not part.strip():
            continue
        claim, sep, role = part.rpartition("=")
        if not sep or not claim.strip() or not role.strip():
            raise SettingsError(
                f"RAILYARD_OIDC_ROLE_MAP: {part.strip()!r} is not a claim_value=role pair"
            )
        pairs[claim.strip()] = role.strip()
    return pairs


def normalize_database_url(url: str) -> str:
    """Use the asyncpg driver for ``postgres://`` and ``postgresql://`` URLs.

    Raises :class:`SettingsError` for another database or driver.
    """
    if not url:
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise SettingsError("DATABASE_URL must look like postgresql://user:pass@host:5432/db")
    if scheme in ("postgres", "postgresql", "postgresql+asyncpg"):
        return f"postgresql+asyncpg://{rest}"
    raise SettingsError(
        f"DATABASE_URL scheme {scheme!r} is not supported: use postgresql:// (asyncpg driver)"
    )
