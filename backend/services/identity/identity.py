"""Who is signed in: the request's user as a plain value, not a database row.

The web layers (``backend.api``, ``backend.auth``, ``frontend``) never hold a SQLAlchemy
model: the user of a login session or an API token is loaded here and handed on as an
:class:`Identity`, a frozen msgspec struct (id, email, display name, role, kind, the group
names the identity provider claimed). :class:`Account` is the read-only shape that both an
:class:`Identity` and a stored user satisfy, for the service functions that accept either
(deciding a principal, minting a token, opening a session).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec


class Account(Protocol):
    """The read-only facts of an account that callers outside the database layer use."""

    @property
    def id(self) -> uuid.UUID:
        """The account's id."""

    @property
    def email(self) -> str:
        """Its e-mail address (the login name)."""

    @property
    def display_name(self) -> str:
        """Its display name ("" when none was given)."""

    @property
    def role(self) -> str:
        """Its role name (admin, editor, operator, viewer)."""

    @property
    def external_groups(self) -> Any:
        """The identity provider's group names from the last single sign-on (a list)."""


class Identity(msgspec.Struct, frozen=True):
    """The signed-in user of a request.

    ``kind`` is ``"human"`` or ``"service"`` (a service account, which only signs in with
    API tokens); ``external_groups`` are the group names the identity provider claimed at
    the last single sign-on (strings only).
    """

    id: uuid.UUID
    email: str
    display_name: str
    role: str
    kind: str = "human"
    external_groups: tuple[str, ...] = ()


def identity_of(user: Any) -> Identity:
    """The :class:`Identity` of a stored user row (any object with the user's columns)."""
    groups: Sequence[Any] = user.external_groups or ()
    return Identity(
        id=user.id,
        email=user.email,
        display_name=user.display_name,
        role=user.role,
        kind=user.kind,
        external_groups=tuple(g for g in groups if isinstance(g, str)),
    )
