"""Service accounts: users of kind ``service`` for automation. They cannot log in
interactively (they have no password, and :func:`backend.services.identity.accounts.sign_in` refuses
them) and act only through API tokens they own, within their role and grants. Created by
admins; audited as ``user.create`` with ``details.kind = "service"``.
"""

from __future__ import annotations

import re
import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Role
from backend.db.models import User
from backend.services import audit
from backend.services.identity.naming import InvalidName, add_unique, clean_name

SERVICE_DOMAIN = "service.railyard.invalid"
_SLUG = re.compile(r"[^a-z0-9]+")


async def create_service_account(session: AsyncSession, name: str, role: str) -> User:
    """Create a service account named ``name`` with ``role`` (a
    :class:`~backend.auth.policy.Role` value); its email is ``<slug>@service.railyard.invalid``.

    Raises :class:`~backend.services.identity.naming.InvalidName` (empty, taken, or unknown role).
    """
    name = clean_name(name, 100)
    if role not in {r.value for r in Role}:
        raise InvalidName(f"unknown role {role!r}")
    slug = _SLUG.sub("-", name.lower()).strip("-") or "service"
    user = User(
        email=f"{slug}@{SERVICE_DOMAIN}",
        display_name=name,
        password_hash=None,  # no password; sign_in() refuses service accounts anyway
        role=role,
        kind="service",
    )
    await add_unique(session, user, f"a service account named {name!r} exists already")
    await audit.record(
        session,
        "user.create",
        "user",
        user.id,
        after={"email": user.email, "role": role, "kind": "service"},
        details={"kind": "service"},
    )
    return user


async def list_service_accounts(session: AsyncSession) -> list[User]:
    """Every service account, by name."""
    rows = await session.execute(
        select(User).where(User.kind == "service").order_by(User.display_name)
    )
    return list(rows.scalars())


async def get_service_account(session: AsyncSession, user_id: uuid.UUID) -> User | None:
    """The service account with that id (None for unknown ids and for people)."""
    user = await session.get(User, user_id)
    return user if user is not None and user.kind == "service" else None
