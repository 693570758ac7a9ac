"""The parts of a calling run's input stored by reference (docs/engine.md, "For-each at
scale")."""

from __future__ import annotations

from typing import Any

import msgspec

PARENT_PART_BYTES = 16 * 1024
"""A run whose graph calls other workflows (Sub-workflow, For-each) stores the parts of
its input from this length of JSON text by reference (docs/engine.md, "For-each at
scale"): it is read again for every batch of children that end, and a part stored by
reference is read back once per read, where one stored inline is decoded in every column
that holds it (the run's input, its trigger's input and output, the next step's input),
and not at all once the run has started."""


def parent_parts(input: Any) -> tuple[Any, ...]:
    """The parts of a calling run's ``input`` stored by reference
    (``NewRun.by_reference``): its top-level lists and objects (the input itself when it
    is a list) of :data:`PARENT_PART_BYTES` or more of JSON text."""
    parts = list(input.values()) if isinstance(input, dict) else [input]
    return tuple(part for part in parts if _large(part))


def _large(part: Any) -> bool:
    if not isinstance(part, dict | list):
        return False
    try:
        return len(msgspec.json.encode(part)) >= PARENT_PART_BYTES
    except (msgspec.EncodeError, UnicodeEncodeError):  # refused by the run's insert
        return False
