"""``control.join``: merges branches.

``mode`` ``all`` (default: every *activated* incoming branch; branches not taken never
block), ``first`` (the first arrival fires; later arrivals are ignored and never fire the
join again) or ``n_of_m`` (fires after ``count`` arrivals, or with what arrived once every
branch is resolved). The compiler turns ``mode`` and ``count`` into the step's
:class:`~designer_schema.graph.JoinSpec` (:attr:`NodeTypeSpec.config_join`); the planner
reads only that. Output shape, whatever the wiring: an object mapping each arrived
predecessor's step id to its output, in graph edge order (``{"a": [], "b": {"b": 1}}``),
even when only one branch arrived.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeType
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step


class JoinConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``mode`` and ``count``: what the join waits for (the compiler reads them into the
    step's join spec; the behaviour needs neither)."""

    mode: Annotated[
        Literal["all", "first", "n_of_m"],
        msgspec.Meta(
            title="Wait for",
            extra_json_schema={
                "x-enum-labels": {
                    "all": "All activated branches",
                    "first": "First arrival",
                    "n_of_m": "N of the branches",
                }
            },
        ),
    ] = "all"
    count: Annotated[int, msgspec.Meta(title="N (for n_of_m)")] = 1


SPEC = NodeTypeSpec(
    type="control.join",
    label="Join",
    kind="control",
    category="Flow",
    icon="merge",
    description=(
        "Waits for incoming branches (all activated, first arrival, or N of M) and outputs "
        "an object keyed by the arrived steps' ids."
    ),
    config_schema=config_schema(JoinConfig),
    config_join=True,
    output_schema={
        "type": "object",
        "additionalProperties": True,
        "description": "Arrived predecessor step id -> its output, in edge order.",
        "x-same-as-input": True,
    },
)


class Join(InlineBehaviour):
    """Passes on its keyed input."""

    keyed_input: ClassVar[bool] = True
    config_type = JoinConfig

    def evaluate(self, step: Step, config: JoinConfig, data: Any) -> InlineResult:
        return InlineResult(data)


NODE = NodeType(SPEC, Join())
