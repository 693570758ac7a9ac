"""Settings with an encryption key, for the tests that store credentials (a module that
imports :func:`settings` overrides the session's settings fixture with it)."""

from __future__ import annotations

import msgspec
import pytest

from backend import crypto
from backend.settings import Settings

KEY = crypto.generate_key()


@pytest.fixture(scope="session")
def settings(settings: Settings) -> Settings:
    """The integration settings plus an encryption key."""
    return msgspec.structs.replace(settings, encryption_key=KEY)
