"""Wire types of API tokens, shared by the token and admin token controllers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from backend.api.schemas import Name


class TokenIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/tokens: a name, scopes (``read``, ``run``, ``edit``, ``admin``; at
    most what the owner's role allows) and an optional expiry in days (0 or absent: none).
    Without ``scopes`` the token gets the strongest scope the role allows."""

    name: Name
    scopes: (
        Annotated[list[Literal["read", "run", "edit", "admin"]], msgspec.Meta(min_length=1)] | None
    ) = None
    expires_in_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] | None = None


class TokenOut(msgspec.Struct):
    """An API token; ``token`` is only present in the creation answer."""

    id: str
    name: str
    created_at: datetime
    last_used_at: datetime | None
    token: str | None = None
    scopes: list[str] = []
    expires_at: datetime | None = None
    owner: str | None = None


def token_out(row: Any, token: str | None = None, owner: str | None = None) -> TokenOut:
    """Wire form of an API token row."""
    return TokenOut(
        str(row.id),
        row.name,
        row.created_at,
        row.last_used_at,
        token,
        list(row.scopes),
        row.expires_at,
        owner,
    )
