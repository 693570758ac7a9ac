"""Finding 10: the password may not contain the account's email address, dots or not.

The password was folded (case, separators such as ``.`` removed) before the check, the
address was not, so an address with a dot (every domain has one) was never found in it.
"""

from __future__ import annotations

import pytest

from backend.services.identity.passwords import WeakPassword, check_password

REFUSED = [
    ("al@example.com", "al@example.com!!"),  # local part too short to count on its own
    ("al@example.com", "AL@Example.Com 2024"),
    ("jo@mail.example.org", "xx jo@mail.example.org"),
    ("ada.lovelace@example.com", "ada.lovelace!!7"),
    ("ada.lovelace@example.com", "Ada Lovelace 1815"),
    ("\uff22\uff4f\uff42@example.com", "bob@example.com#1"),  # NFKC: full-width letters
]


@pytest.mark.parametrize(("email", "password"), REFUSED)
def test_password_containing_the_email_is_refused(email: str, password: str) -> None:
    with pytest.raises(WeakPassword, match="email address or user name"):
        check_password(password, email=email)


def test_unrelated_password_passes_for_an_address_with_dots() -> None:
    check_password("amber signal lamp at dusk", email="al@ex.ample.com")
