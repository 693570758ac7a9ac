"""A webhook body checked against its trigger's body schema (``trigger.webhook`` version 4,
``body_schema``; docs/webhooks.md, "Body schema").

The schema is JSON Schema (the dialect its ``$schema`` names, else 2020-12), checked with
the ``jsonschema`` package; formats are not asserted (``format`` is an annotation in
2020-12). Each problem names its field as a dotted path from the run input (``body.qty``,
``body.items.0.price``), the way expressions read it.
"""

from __future__ import annotations

import logging
from typing import Any

from jsonschema import SchemaError, ValidationError
from jsonschema.validators import validator_for

log = logging.getLogger(__name__)

MAX_PROBLEMS = 20
"""How many problems an answer or a run lists at most (the first ones, by field)."""


def _field(error: ValidationError) -> str:
    parts = ["body", *(str(p) for p in error.absolute_path)]
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [p for p in error.validator_value if p not in error.instance]
        if missing:
            parts.append(str(missing[0]))
    return ".".join(parts)


def body_problems(schema: Any, body: Any) -> list[dict[str, str]]:
    """How ``body`` breaks ``schema``: ``[{"field", "message"}]`` sorted by field, at most
    :data:`MAX_PROBLEMS`; ``[]`` when it conforms, when ``schema`` is not an object, or
    when the schema itself is invalid (logged: the designer shows that at edit time)."""
    if not isinstance(schema, dict) or not schema:
        return []
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        log.warning("body schema is not valid JSON Schema, not checked: %s", exc.message)
        return []
    errors = sorted(cls(schema).iter_errors(body), key=lambda e: (_field(e), e.message))
    return [{"field": _field(e), "message": e.message} for e in errors[:MAX_PROBLEMS]]
