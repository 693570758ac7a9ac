"""Names of administrative objects (groups, projects, service accounts)."""

from __future__ import annotations


class InvalidName(ValueError):
    """An empty, over-long or already taken name (``field`` is ``"name"``)."""

    field = "name"


def clean_name(name: str, limit: int = 200) -> str:
    """``name`` stripped; raises :class:`InvalidName` when empty or longer than ``limit``."""
    name = (name or "").strip()
    if not name:
        raise InvalidName("a name is required")
    if len(name) > limit:
        raise InvalidName(f"the name is longer than {limit} characters")
    return name
