"""Fields of the API-token forms (the account's tokens page, the service-account admin page)."""

from __future__ import annotations

from backend.services.identity import api_tokens


def form_scopes(form: dict[str, str]) -> list[str] | None:
    """The scope chosen in a token form (absent: the strongest the owner's role allows)."""
    chosen = form.get("scopes", "").strip()
    return [chosen] if chosen else None


def form_days(value: str) -> int | None:
    """Days from a form field (empty: None); raises :class:`api_tokens.TokenError`."""
    if not value.strip():
        return None
    try:
        return int(value)
    except ValueError:
        raise api_tokens.TokenError(
            "expiry must be a whole number of days", "expires_in_days"
        ) from None
