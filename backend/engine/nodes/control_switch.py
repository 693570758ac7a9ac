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

from typing import Annotated, Any, Literal

import msgspec

from backend.engine.nodes.base import (
    SAME_AS_INPUT,
    InlineBehaviour,
    InlineResult,
    NodeType,
    truthy,
)
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

DEFAULT_PORT = "default"


class SwitchConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``value`` (any JSON value, usually an expression), ``cases`` (case names, required),
    ``rules`` (case name -> condition value; ``None``: match by ``value``) and ``mode``."""

    value: Annotated[
        Any, msgspec.Meta(title="Value", description="Matched against case names, e.g. =body.kind")
    ] = None
    cases: Annotated[
        list[str],
        msgspec.Meta(title="Cases", description="Case names; each becomes an output port."),
    ]
    rules: (
        Annotated[
            dict[str, Any],
            msgspec.Meta(
                title="Rules",
                description="Case name -> condition (=expression); overrides Value.",
                extra_json_schema={"additionalProperties": True},
            ),
        ]
        | None
    ) = None
    mode: Annotated[
        Literal["first", "all"],
        msgspec.Meta(
            title="Match",
            extra_json_schema={
                "x-enum-labels": {"first": "First matching case", "all": "All matching cases"}
            },
        ),
    ] = "first"


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
    config_schema=config_schema(SwitchConfig),
    expression_fields=("value", "rules"),
    output_schema=SAME_AS_INPUT,
)


class Switch(InlineBehaviour):
    """Takes the matching case ports (see the module docstring)."""

    config_type = SwitchConfig

    def evaluate(self, step: Step, config: SwitchConfig, data: Any) -> InlineResult:
        return InlineResult(data, _ports(config))


def _ports(config: SwitchConfig) -> tuple[str, ...]:
    rules = config.rules
    if rules:
        matched = [c for c in config.cases if truthy(rules.get(c))]
    else:
        value = config.value
        text = value if isinstance(value, str) else None if value is None else _text(value)
        matched = [c for c in config.cases if c == text]
    if not matched:
        return (DEFAULT_PORT,)
    return tuple(matched) if config.mode == "all" else (matched[0],)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


NODE = NodeType(SPEC, Switch())
