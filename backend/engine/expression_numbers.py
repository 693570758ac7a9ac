"""Integers turned into text keep every digit.

jsonata-python formats a number as text (``$string(n)``, ``"Order " & n``) through
``Functions.Encoder``, which rounds to 15 significant digits the way JavaScript's
``Number.prototype.toPrecision(15)`` does: ``1234567890123456`` became
``"1.23456789012346e+15"``. In JavaScript a number is a double, so that is all the
precision there is; in Railyard an integer read from a run's input is a Python ``int``
holding every digit that arrived (msgspec decodes JSON integers exactly, PostgreSQL's
``jsonb`` stores them exactly), so its text is those digits. Floats keep JSONata's
15-digit form. :func:`install` replaces the library's encoder once, at import of
:mod:`backend.engine.expressions`.
"""

from __future__ import annotations

from typing import Any

from jsonata.functions import Functions

_LIBRARY_ENCODER = Functions.Encoder


class ExactIntegerEncoder(_LIBRARY_ENCODER):  # type: ignore[misc,valid-type]
    """The library's encoder, but an ``int`` (not a ``bool``) becomes its exact digits."""

    def encode(self, arg: Any) -> str:
        if isinstance(arg, int) and not isinstance(arg, bool):
            return str(arg)
        return str(super().encode(arg))


def install() -> None:
    """Make jsonata-python format integers exactly (idempotent)."""
    Functions.Encoder = ExactIntegerEncoder
