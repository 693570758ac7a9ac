"""Single sign-on accounts: from verified id_token claims to a Railyard user.

- **Link**: an account is found by the id_token's ``(iss, sub)`` pair (table
  ``user_identities``), never by email alone. The first sign-in of a pair creates the
  link: to a new account (no local password) when no account has the token's email; to
  the existing account with that email only when the provider vouches for it
  (``email_verified: true``); otherwise it is refused (403) so nobody takes over a local
  account by registering its email at the provider.
- **Role**: with ``RAILYARD_OIDC_ROLE_CLAIM`` set, the role is derived at every sign-in:
  each value of that claim (a string or a list) is looked up in ``RAILYARD_OIDC_ROLE_MAP``
  (without a map, values that are role names are taken as they are); the most powerful
  match wins (admin > editor > operator > viewer); no match gives
  ``RAILYARD_OIDC_DEFAULT_ROLE``. Without a role claim, new accounts get the default role
  and admins manage roles in Railyard afterwards.
- **Groups**: the ``RAILYARD_OIDC_GROUPS_CLAIM`` values (strings) are stored on the user
  (``users.external_groups``) at every sign-in.
- Deactivated accounts are refused (403).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import User, UserIdentity
from backend.services import audit
from backend.services.identity import accounts
from backend.services.identity.oidc import OidcError
from backend.settings import Settings

__all__ = ["check_settings", "map_role", "user_for_claims"]

_POWER = {role: rank for rank, role in enumerate(reversed(accounts.ROLES))}


def check_settings(settings: Settings) -> None:
    """Raise :class:`OidcError` (500) when the role settings name an unknown role."""
    for role in [settings.oidc_default_role, *settings.oidc_role_map.values()]:
        if role not in accounts.ROLES:
            raise OidcError(
                f"single sign-on settings name role {role!r}; roles are"
                f" {', '.join(accounts.ROLES)}",
                500,
            )


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def map_role(settings: Settings, claims: dict[str, Any]) -> str | None:
    """The role the claims give (module docstring), or ``None`` without a role claim."""
    if not settings.oidc_role_claim:
        return None
    mapping = settings.oidc_role_map
    found = []
    for value in _strings(claims.get(settings.oidc_role_claim)):
        role = mapping.get(value) if mapping else (value if value in accounts.ROLES else None)
        if role in _POWER:
            found.append(role)
    return max(found, key=_POWER.__getitem__) if found else settings.oidc_default_role


async def user_for_claims(
    session: AsyncSession, settings: Settings, claims: dict[str, Any]
) -> User:
    """The account of verified ``claims`` (linked, created, role and groups updated);
    audits ``user.create``/``user.update``/``user.role_change`` as they happen and
    ``auth.login``. Raises :class:`OidcError` (400 no email; 403 refused account)."""
    check_settings(settings)
    issuer, subject = str(claims["iss"]), str(claims["sub"])
    email = str(claims.get("email") or "").strip().lower()
    role = map_role(settings, claims)
    groups = _strings(claims.get(settings.oidc_groups_claim)) if settings.oidc_groups_claim else []
    now = datetime.now(UTC)
    identity = (
        await session.execute(
            select(UserIdentity).where(
                UserIdentity.issuer == issuer, UserIdentity.subject == subject
            )
        )
    ).scalar_one_or_none()
    if identity is not None:
        user = await session.get(User, identity.user_id, with_for_update=True)
        assert user is not None  # the foreign key cascades deletes
    else:
        user = await _link(session, settings, claims, issuer, subject, email, role)
        identity = UserIdentity(user_id=user.id, issuer=issuer, subject=subject, email=email)
        session.add(identity)
    if not user.is_active:
        raise OidcError("this account is deactivated; ask an admin", 403)
    identity.email = email or identity.email
    identity.last_login_at = now
    if role is not None and role != user.role:
        if user.role == "admin" and user.is_active:
            admins = await accounts.count_active_admins(session)
            if admins <= 1:
                role = "admin"  # never demote the last active admin by a claim change
        if role != user.role:
            before = accounts.snapshot(user)
            user.role = role
            await audit.record(
                session,
                "user.role_change",
                "user",
                user.id,
                actor_user_id=user.id,
                actor_label=user.email,
                before=before,
                after=accounts.snapshot(user),
                details={"source": "oidc", "claim": settings.oidc_role_claim},
            )
    user.external_groups = groups
    await session.flush()
    await accounts.record_login(
        session, user, now, {"method": "oidc", "issuer": issuer, "groups": groups}
    )
    return user


async def _link(
    session: AsyncSession,
    settings: Settings,
    claims: dict[str, Any],
    issuer: str,
    subject: str,
    email: str,
    role: str | None,
) -> User:
    if not email:
        raise OidcError("the identity provider sent no email address; add the 'email' scope", 400)
    existing = (
        await session.execute(select(User).where(User.email == email).with_for_update())
    ).scalar_one_or_none()
    if existing is None:
        name = str(claims.get("name") or claims.get("preferred_username") or "")
        user = await accounts.create_user(
            session, email, None, role=role or settings.oidc_default_role, name=name
        )
        return user
    if claims.get("email_verified") is not True:
        raise OidcError(
            "an account with this email already exists and the identity provider did not"
            " verify the email; sign in with your password or ask an admin",
            403,
        )
    await audit.record(
        session,
        "user.update",
        "user",
        existing.id,
        actor_user_id=existing.id,
        actor_label=existing.email,
        details={"linked_identity": {"issuer": issuer, "subject": subject}},
    )
    return existing
