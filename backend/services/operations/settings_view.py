"""The settings overview: every effective setting, read-only, secrets masked.

Settings come from the environment and the settings file (backend/settings.py) and cannot
be changed in the app, so this is a view: what the running process uses, for admins
checking a deployment. A secret (CSRF secret, encryption keys) shows only whether it is
set; passwords inside the database and Redis URLs are replaced by ``***``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from backend.settings import SETTING_VARIABLES, Settings

SECRET_SETTINGS = frozenset(
    {
        "secret_key",
        "encryption_key",
        "encryption_old_keys",
        "metrics_token",
        "redis_sentinel_password",
    }
)
"""Settings whose value is never shown (only whether they are set)."""

URL_SETTINGS = frozenset({"database_url", "redis_url", "elasticsearch_url"})
"""Settings holding URLs whose password part is masked."""

MASK = "***"


class SettingView(msgspec.Struct):
    """One setting: its name, environment variable, shown value (masked when ``secret``)
    and whether it differs from the built-in default."""

    name: str
    variable: str | None
    value: str
    secret: bool
    default: bool


def mask_url(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***``."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{host}{port}"))


def _shown(name: str, value: Any) -> str:
    if name in SECRET_SETTINGS:
        return "set (hidden)" if value else "not set"
    if name in URL_SETTINGS:
        return mask_url(str(value))
    if isinstance(value, tuple | list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def effective_settings(settings: Settings) -> list[SettingView]:
    """Every setting of ``settings``, in declaration order, masked (module docstring)."""
    defaults = Settings(secret_key="")
    out = []
    for name in settings.__struct_fields__:
        value = getattr(settings, name)
        default_value = getattr(defaults, name)
        is_default = value == default_value if name != "secret_key" else False
        out.append(
            SettingView(
                name=name,
                variable=SETTING_VARIABLES.get(name),
                value=_shown(name, value),
                secret=name in SECRET_SETTINGS or name in URL_SETTINGS,
                default=is_default,
            )
        )
    return out
