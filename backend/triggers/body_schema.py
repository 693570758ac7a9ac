"""A webhook body checked against its trigger's body schema (``trigger.webhook`` version 4,
``body_schema``; docs/webhooks.md, "Body schema").

The schema is JSON Schema (the dialect its ``$schema`` names, else 2020-12), checked with
the ``jsonschema`` package; formats are not asserted (``format`` is an annotation in
2020-12). Each problem names its field as a dotted path from the run input (``body.qty``,
``body.items.0.price``; a CloudEvent's ``data.qty``), the way expressions read it.

The same check, with the same mode, applies to every way a body reaches the trigger
(:func:`verdict`): a webhook delivery, each event of a CloudEvents delivery (its ``data``),
a call of the designer's test URL, and a test run of the draft (its given input's body).
"""

from __future__ import annotations

import logging
from typing import Any

from jsonschema import SchemaError, ValidationError
from jsonschema.validators import validator_for

from backend.engine.nodes.trigger_webhook import BODY_ERRORS

log = logging.getLogger(__name__)

MAX_PROBLEMS = 20
"""How many problems an answer or a run lists at most (the first ones, by field)."""


def _field(error: ValidationError, root: str) -> str:
    parts = [root, *(str(p) for p in error.absolute_path)]
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [p for p in error.validator_value if p not in error.instance]
        if missing:
            parts.append(str(missing[0]))
    return ".".join(parts)


def body_problems(schema: Any, body: Any, *, root: str = "body") -> list[dict[str, str]]:
    """How ``body`` breaks ``schema``: ``[{"field", "message"}]`` sorted by field, at most
    :data:`MAX_PROBLEMS`, each field a dotted path starting at ``root`` (the body's key in
    the run input: ``body``, a CloudEvent's ``data``); ``[]`` when it conforms, when
    ``schema`` is not an object, or when the schema itself is invalid (logged: the
    designer shows that at edit time)."""
    if not isinstance(schema, dict) or not schema:
        return []
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        log.warning("body schema is not valid JSON Schema, not checked: %s", exc.message)
        return []
    errors = sorted(cls(schema).iter_errors(body), key=lambda e: (_field(e, root), e.message))
    return [{"field": _field(e, root), "message": e.message} for e in errors[:MAX_PROBLEMS]]


class BodyRefused(Exception):
    """A body breaks the body schema and the trigger's mode is ``reject``: ``problems``
    (non-empty, as :func:`body_problems` gives them) say how."""

    def __init__(self, problems: list[dict[str, str]]) -> None:
        super().__init__(f"the body breaks the workflow's body schema: {problems[0]['message']}")
        self.problems = problems


def verdict(
    mode: str | None, schema: Any, run_input: dict[str, Any], *, root: str = "body"
) -> dict[str, Any]:
    """Apply a trigger's body schema to ``run_input[root]`` with ``mode`` (the published or
    draft trigger's ``invalid_body``: ``None`` not checked, ``reject`` or
    ``mark_invalid``). Returns the run input to start with: ``run_input`` itself when the
    body conforms (or is not checked), else for ``mark_invalid`` a copy carrying the
    problems under ``body_errors`` (the run then fails at its trigger step); raises
    :class:`BodyRefused` for ``reject``."""
    if mode is None:
        return run_input
    problems = body_problems(schema, run_input.get(root), root=root)
    if not problems:
        return run_input
    if mode == "mark_invalid":
        return {**run_input, BODY_ERRORS: problems}
    raise BodyRefused(problems)
