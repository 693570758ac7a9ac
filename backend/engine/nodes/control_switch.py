"""``control.switch``: routes the input to matching case ports, else to ``default``.

``cases`` is a literal list of case names; each becomes an output port
(:attr:`NodeTypeSpec.dynamic_outputs`) next to the fixed ``default`` port. With ``rules``
(case name -> condition, usually an expression) the cases whose condition is truthy match;
without rules a case matches when it equals ``value`` (compared as text). ``mode``
``first`` (default) takes the first matching case in ``cases`` order; ``all`` takes every
matching case (multi-choice: several branches run in parallel). No match takes
``default``. Output: the input, unchanged.
"""

from __future__ import annotations

from typing import Any

from backend.engine.nodes.base import (
    SAME_AS_INPUT,
    InlineBehaviour,
    InlineResult,
    NodeError,
    NodeType,
    truthy,
)
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

DEFAULT_PORT = "default"

SPEC = NodeTypeSpec(
    type="control.switch",
    label="Switch",
    kind="control",
    category="Flow",
    icon="route",
    description=(
        "Routes the input to one (or, in mode all, every) matching case port, else to default."
    ),
    outputs=(DEFAULT_PORT,),
    dynamic_outputs="cases",
    config_schema={
        "type": "object",
        "properties": {
            "value": {
                "title": "Value",
                "description": "Matched against case names, e.g. =body.kind",
            },
            "cases": {
                "type": "array",
                "items": {"type": "string"},
                "title": "Cases",
                "description": "Case names; each becomes an output port.",
            },
            "rules": {
                "type": "object",
                "additionalProperties": True,
                "title": "Rules",
                "description": "Case name -> condition (=expression); overrides Value.",
            },
            "mode": {
                "type": "string",
                "enum": ["first", "all"],
                "x-enum-labels": {"first": "First matching case", "all": "All matching cases"},
                "default": "first",
                "title": "Match",
            },
        },
        "required": ["cases"],
    },
    expression_fields=("value", "rules"),
    output_schema=SAME_AS_INPUT,
)


class Switch(InlineBehaviour):
    """Takes the matching case ports (see the module docstring)."""

    def evaluate(self, step: Step, config: dict[str, Any], data: Any) -> InlineResult:
        return InlineResult(data, _ports(config))


def _ports(config: dict[str, Any]) -> tuple[str, ...]:
    cases = [c for c in config.get("cases") or [] if isinstance(c, str)]
    rules = config.get("rules")
    if rules is not None and not isinstance(rules, dict):
        raise NodeError("rules must be an object of case -> condition", field="rules")
    if rules:
        matched = [c for c in cases if truthy(rules.get(c))]
    else:
        value = config.get("value")
        text = value if isinstance(value, str) else None if value is None else _text(value)
        matched = [c for c in cases if c == text]
    if not matched:
        return (DEFAULT_PORT,)
    return tuple(matched) if config.get("mode") == "all" else (matched[0],)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


NODE = NodeType(SPEC, Switch())
