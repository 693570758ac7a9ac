"""Login throttling and temporary lockout, per account and per client address.

Counters live in PostgreSQL (table ``login_throttle``) so every API process sees the same
numbers. Each failed sign-in adds one failure to the attempted account (the email as
typed, lower-cased, whether or not such an account exists, so a lockout reveals nothing)
and one to the client address. A counter's window opens at its first failure and lasts
:attr:`ThrottlePolicy.window`; reaching the limit within it locks the key for
:attr:`ThrottlePolicy.lockout` and starts a new window. A successful sign-in clears the
account's counter (not the address's: one good account must not reset an address that is
guessing at others).

Defaults (docs/security.md, "Identity"): 5 failures in 15 minutes lock an account for 15
minutes; 50 failures in 15 minutes lock an address for 15 minutes. While locked, sign-in
is refused before the password is checked (the answer is 429 with ``Retry-After``), so a
correct password does not help an attacker during a lockout either.

The increment is one ``INSERT ... ON CONFLICT DO UPDATE`` (row lock), so concurrent
failures from several processes are all counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import LoginThrottle
from backend.settings import Settings

__all__ = [
    "ACCOUNT",
    "ADDRESS",
    "Lock",
    "ThrottlePolicy",
    "check",
    "clear",
    "purge",
    "record_failure",
]

ACCOUNT = "account"
ADDRESS = "address"


@dataclass(frozen=True)
class ThrottlePolicy:
    """Limits: ``account_limit`` / ``address_limit`` failures within ``window`` lock the
    account / address for ``lockout``."""

    account_limit: int = 5
    address_limit: int = 50
    window: timedelta = timedelta(minutes=15)
    lockout: timedelta = timedelta(minutes=15)

    @classmethod
    def from_settings(cls, settings: Settings) -> ThrottlePolicy:
        """The policy of ``RAILYARD_LOGIN_*`` settings."""
        return cls(
            account_limit=max(1, settings.login_max_failures),
            address_limit=max(1, settings.login_address_max_failures),
            window=timedelta(minutes=settings.login_window_minutes),
            lockout=timedelta(minutes=settings.login_lockout_minutes),
        )

    def limit(self, scope: str) -> int:
        """The failure limit of ``scope`` (:data:`ACCOUNT` or :data:`ADDRESS`)."""
        return self.account_limit if scope == ACCOUNT else self.address_limit


@dataclass(frozen=True)
class Lock:
    """A refused sign-in: which ``scope`` is locked and until when (UTC)."""

    scope: str
    until: datetime

    def retry_after(self, now: datetime) -> int:
        """Whole seconds until the lock ends (at least 1), for ``Retry-After``."""
        return max(1, int((self.until - now).total_seconds() + 0.999))


def _keys(email: str, address: str | None) -> list[tuple[str, str]]:
    keys = [(ACCOUNT, email.strip().lower()[:320])]
    if address:
        keys.append((ADDRESS, address[:320]))
    return keys


async def check(
    session: AsyncSession, email: str, address: str | None, now: datetime
) -> Lock | None:
    """The lock refusing a sign-in to ``email`` from ``address`` now, or ``None``.

    When both are locked, the later-ending lock is returned.
    """
    locks = []
    for scope, key in _keys(email, address):
        until = (
            await session.execute(
                select(LoginThrottle.locked_until).where(
                    LoginThrottle.scope == scope, LoginThrottle.key == key
                )
            )
        ).scalar_one_or_none()
        if until is not None and until > now:
            locks.append(Lock(scope, until))
    return max(locks, key=lambda lock: lock.until) if locks else None


_BUMP = text(
    """
    insert into login_throttle (scope, key, failures, window_start, locked_until)
    values (:scope, :key, 1, :now, null)
    on conflict (scope, key) do update set
      failures = case when login_throttle.window_start <= :window_open
                      then 1 else login_throttle.failures + 1 end,
      window_start = case when login_throttle.window_start <= :window_open
                          then :now else login_throttle.window_start end
    returning failures
    """
)


async def record_failure(
    session: AsyncSession,
    email: str,
    address: str | None,
    now: datetime,
    policy: ThrottlePolicy,
) -> list[Lock]:
    """Count one failed sign-in; returns the locks this failure started (often none).

    A key whose counter reaches its limit is locked until ``now + policy.lockout`` and its
    counter restarts at zero.
    """
    await purge(session, now, policy)
    started = []
    for scope, key in _keys(email, address):
        failures = (
            await session.execute(
                _BUMP,
                {"scope": scope, "key": key, "now": now, "window_open": now - policy.window},
            )
        ).scalar_one()
        if failures >= policy.limit(scope):
            until = now + policy.lockout
            await session.execute(
                text(
                    "update login_throttle set locked_until = :until, failures = 0,"
                    " window_start = :now where scope = :scope and key = :key"
                ),
                {"until": until, "now": now, "scope": scope, "key": key},
            )
            started.append(Lock(scope, until))
    return started


async def clear(session: AsyncSession, email: str) -> None:
    """Forget the failures (and any lock) of the account ``email`` (after a good sign-in
    or an admin's password reset)."""
    await session.execute(
        delete(LoginThrottle).where(
            LoginThrottle.scope == ACCOUNT, LoginThrottle.key == email.strip().lower()
        )
    )


async def purge(session: AsyncSession, now: datetime, policy: ThrottlePolicy) -> int:
    """Delete counters whose window and lock are both over; returns how many."""
    result = await session.execute(
        delete(LoginThrottle).where(
            LoginThrottle.window_start <= now - policy.window,
            (LoginThrottle.locked_until.is_(None)) | (LoginThrottle.locked_until <= now),
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
