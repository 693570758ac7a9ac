"""Password hashing (argon2id) and the password policy.

Policy (NIST SP 800-63B, section 5.1.1.2 "Memorized Secret Verifiers"; documented in
docs/security.md, "Identity"):

- at least :data:`MIN_LENGTH` (12) characters and at most :data:`MAX_LENGTH` (256),
  counted after Unicode NFKC normalisation; every character is allowed, spaces included;
  there are no composition rules (no "one digit and one symbol") and no expiry;
- not a commonly used password: compared case-insensitively against the bundled list
  ``common_passwords.txt``, both as typed (separators `` -_.`` removed) and with trailing
  digits and punctuation removed, so ``Password2024!`` and ``Welcome 123456`` are refused;
- not the account's email address or its local part (``ada`` of ``ada@example.com``, when
  it has three characters or more), and not the product's name;
- at least :data:`MIN_DISTINCT` (5) different characters (refuses ``aaaaaaaaaaaa`` and
  ``121212121212``).

:func:`check_password` raises :class:`WeakPassword` with a message a user can act on.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

__all__ = [
    "MAX_LENGTH",
    "MIN_DISTINCT",
    "MIN_LENGTH",
    "WeakPassword",
    "check_password",
    "hash_password",
    "verify_password",
]

MIN_LENGTH = 12
MAX_LENGTH = 256
MIN_DISTINCT = 5

# argon2-cffi's defaults follow RFC 9106's second recommended option (argon2id, 64 MiB).
_HASHER = PasswordHasher()
_SEPARATORS = re.compile(r"[\s\-_.]+")
_TRAILING = re.compile(r"[\d\W_]+$")


class WeakPassword(ValueError):
    """The password does not meet the policy; ``str(exc)`` says why (for the user)."""


def hash_password(password: str) -> str:
    """argon2id hash of ``password`` (PHC string, ``$argon2id$v=19$...``)."""
    return _HASHER.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when ``password`` matches ``password_hash``; False for no or a malformed hash."""
    if not password_hash:
        _HASHER.hash(password)  # spend the time a real check takes
        return False
    try:
        return _HASHER.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


@functools.cache
def _common() -> frozenset[str]:
    text = (Path(__file__).with_name("common_passwords.txt")).read_text(encoding="utf-8")
    return frozenset(
        _fold(line) for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def _fold(value: str) -> str:
    return _SEPARATORS.sub("", unicodedata.normalize("NFKC", value).casefold())


def check_password(password: str, *, email: str = "") -> None:
    """Raise :class:`WeakPassword` unless ``password`` meets the policy (module docstring).

    ``email`` is the account's address; the password may not contain it or its local part.
    """
    normalized = unicodedata.normalize("NFKC", password)
    if len(normalized) < MIN_LENGTH:
        raise WeakPassword(f"use at least {MIN_LENGTH} characters (a few words work well)")
    if len(normalized) > MAX_LENGTH:
        raise WeakPassword(f"use at most {MAX_LENGTH} characters")
    folded = _fold(normalized)
    if len(set(folded)) < MIN_DISTINCT:
        raise WeakPassword("this password repeats too few characters; choose another")
    stem = _TRAILING.sub("", folded)
    common = _common()
    if folded in common or stem in common or (not stem and folded.isdigit()):
        raise WeakPassword("this password is too common; choose another")
    # the address is folded as the password is (case, NFKC, separators such as the dots
    # of every domain): an unfolded address with a dot could never be found in it
    address = _fold(email.strip())
    local = _fold(email.strip().rpartition("@")[0] or email.strip())
    if address and (address in folded or (len(local) >= 3 and local in folded)):
        raise WeakPassword("the password may not contain your email address or user name")
