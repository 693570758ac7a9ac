"""Compile diagnostics: what is wrong with a diagram, and where."""

from __future__ import annotations

from typing import Literal

import msgspec

Severity = Literal["error", "warning"]


class Diagnostic(msgspec.Struct, frozen=True):
    """One finding of the compiler.

    ``code`` is a stable machine name; the full list is
    :data:`designer_schema.compiler.DIAGNOSTIC_CODES` (``invalid_node_id``, ``duplicate_node_id``,
    ``unknown_node_type``, ``missing_config``, ``unbound_reference``, ``invalid_config``,
    ``expression_syntax``,
    ``dangling_edge``, ``unknown_port``, ``duplicate_edge``, ``note_edge``, ``no_trigger``,
    ``multiple_triggers``, ``unreachable_node``, ``cycle``, and the data-flow codes
    ``unknown_field``, ``wrong_type``, ``unknown_step``, ``not_upstream``, ``list_value``).
    ``node_id`` and ``edge_id`` say where (either may be ``None``); ``field`` is a config
    field path such as ``mapping.total`` when the problem is in one field.
    """

    severity: Severity
    code: str
    message: str
    node_id: str | None = None
    edge_id: str | None = None
    field: str | None = None
