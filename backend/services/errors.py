"""The error every domain's use cases raise for input that breaks a rule.

The API answers it with 422 (or 400 where the route says so) and the problem details'
``field`` (backend/api/errors.py); pages show it beside the field it names.
"""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input that breaks a rule; ``field`` says where (a JSON path or a parameter name)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
