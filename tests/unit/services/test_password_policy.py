"""The password policy (NIST SP 800-63B style): length, common list, email, repetition."""

from __future__ import annotations

import pytest

from backend.services.identity.passwords import (
    MIN_LENGTH,
    WeakPassword,
    check_password,
    hash_password,
    verify_password,
)


@pytest.mark.parametrize(
    ("password", "why"),
    [
        ("short pass", "at least 12"),
        ("x" * 257, "at most 256"),
        ("Password2024!", "too common"),
        ("Welcome 123456", "too common"),
        ("correct horse battery staple", "too common"),
        ("QWERTYUIOP123", "too common"),
        ("123456789012345", "too common"),
        ("aaaaaaaaaaaaaaaa", "too few characters"),
        ("121212121212", "too few characters"),
        ("ada@example.com-backup", "email"),
        ("my name is ADA lovelace", "email"),
    ],
)
def test_refused(password: str, why: str) -> None:
    with pytest.raises(WeakPassword, match=why):
        check_password(password, email="ada@example.com")


@pytest.mark.parametrize(
    "password",
    [
        "amber signal lamp at dusk",  # spaces and only lower case are fine
        "Tr0mb0ne-Quiet-Harbor",
        "ünïcödé pässwörd ☃",
    ],
)
def test_accepted(password: str) -> None:
    check_password(password, email="ada@example.com")


def test_minimum_length_is_exactly_twelve() -> None:
    assert MIN_LENGTH == 12
    check_password("fjord quartz", email="")
    with pytest.raises(WeakPassword, match="at least 12"):
        check_password("fjord quart", email="")


def test_hash_is_argon2id_and_verifies() -> None:
    hashed = hash_password("amber signal lamp at dusk")
    assert hashed.startswith("$argon2id$")
    assert verify_password(hashed, "amber signal lamp at dusk")
    assert not verify_password(hashed, "amber signal lamp at dawn")
    assert not verify_password(None, "anything at all")
    assert not verify_password("not-a-hash", "anything at all")
