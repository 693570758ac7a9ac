"""Wire types of the expression editor's API (``/api/workflows/{id}/expressions``)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from backend.services.workflows.expression_data import FieldSource
from designer_schema.diagram import Diagram


class FieldsIn(msgspec.Struct, forbid_unknown_fields=True):
    """Which node of the (unsaved) ``diagram`` the picker is for; ``pinned`` maps step ids
    to data that stands in for their outputs in the last run."""

    diagram: Diagram
    node_id: str
    pinned: dict[str, Any] = {}


class CallerOut(msgspec.Struct):
    """A call step whose input a trigger's schema was inferred from: its workflow's id and
    name (only callers the reader may read count, so always named), the step's id and
    label, and its kind ("For each" or "Sub-workflow")."""

    workflow_id: str
    workflow: str | None
    node_id: str
    step: str
    kind: str


class InferredInputOut(msgspec.Struct):
    """The run input's schema inferred from the workflow's callers (its trigger declares
    none), and the call steps it comes from."""

    schema: dict[str, Any]
    callers: list[CallerOut]


class FieldsOut(msgspec.Struct):
    """The picker's groups, and which data their examples come from (``None``: no data);
    ``child_input``: for a For each or Sub-workflow step, the JSON Schema of what each of
    its child runs receives (``None`` for other steps); ``inferred_input``: when the
    workflow's trigger declares no input schema and other workflows call this one, what
    they send (``None`` otherwise)."""

    sources: list[FieldSource]
    data_from: str | None
    child_input: dict[str, Any] | None = None
    inferred_input: InferredInputOut | None = None


class PreviewIn(msgspec.Struct, forbid_unknown_fields=True):
    """An ``expression`` (with or without its leading ``=``) of node ``node_id``, to
    evaluate against the last run's data (``pinned`` as for :class:`FieldsIn`)."""

    diagram: Diagram
    node_id: str
    expression: str
    pinned: dict[str, Any] = {}


class InferSchemaIn(msgspec.Struct, forbid_unknown_fields=True):
    """Infer a body schema from ``sample`` (any JSON value; ``source`` ``sample``), from the
    last webhook test call (``test_call``) or from the newest run's body (``last_run``)."""

    source: Literal["sample", "test_call", "last_run"] = "sample"
    sample: Any = None


class InferSchemaOut(msgspec.Struct):
    """The inferred JSON Schema and where the sample came from (``sample``, ``test call``,
    ``run <id>``)."""

    schema: dict[str, Any]
    source: str
