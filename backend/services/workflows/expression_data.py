"""Data for the expression editor: the fields a step can read, a live preview, schema inference.

The designer's expression editor asks three things about one node of the draft diagram:

- :func:`available_fields`: what an expression there can read, grouped by source (``$``
  the input, ``$trigger``, ``$steps.<id>``, ``$run``), from the declared output schemas
  (:class:`designer_schema.dataflow.DataFlow`) and from sample data: the workflow's last run
  (:func:`last_run_sample`) with pinned values standing in for step outputs.
- :func:`preview`: the value of an expression against that sample data, evaluated by the
  engine's evaluator with the same limits as a run (``backend.engine.expressions``), plus
  the data-flow diagnostics of the expression.
- :func:`infer_schema`: a JSON Schema of a sample body (GenSON, every field seen required),
  for the webhook's body schema.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

import msgspec
from genson import SchemaBuilder
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Principal
from backend.db import payloads
from backend.db.models import Run, StepRun
from backend.engine.expression_paths import JsonataReader
from backend.engine.expressions import ExpressionError, compile_expression
from backend.services.errors import InvalidInput
from backend.services.triggers import webhooks
from backend.services.workflows import child_contracts
from designer_schema.catalog import Catalog
from designer_schema.dataflow import RUN_SCHEMA, DataFlow
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import Diagram
from designer_schema.schema_paths import FieldInfo, list_fields, value_schema

__all__ = [
    "FieldSource",
    "NodeNotFound",
    "Preview",
    "RunSample",
    "available_fields",
    "callers_input",
    "infer_schema",
    "last_run_sample",
    "preview",
]

_READER = JsonataReader()
_EXAMPLE_CHARS = 80


class NodeNotFound(InvalidInput):
    """The diagram has no step with the node id asked about (a 400 on ``node_id``)."""

    def __init__(self, node_id: str) -> None:
        super().__init__(f"the diagram has no step {node_id!r}", field="node_id")


@dataclass
class RunSample:
    """Data of one run for previews: the ``trigger`` output (the run input), each step's
    ``inputs`` and ``outputs`` by step id, and the run's id, workflow and version."""

    run_id: str | None = None
    workflow_id: str = ""
    version: int = 0
    trigger: Any = None
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)

    def pinned(self, values: dict[str, Any]) -> RunSample:
        """A copy whose step outputs are replaced by ``values`` (pinned data by step id)."""
        return RunSample(
            self.run_id,
            self.workflow_id,
            self.version,
            self.trigger,
            dict(self.inputs),
            {**self.outputs, **values},
        )


class FieldSource(msgspec.Struct, frozen=True):
    """One group of the field picker: ``prefix`` is what a path starts with (``""`` for
    the input, ``$trigger``, ``$steps.set_1``, ``$run``), ``label`` names it, ``fields``
    lists the paths below it (``path`` is relative to ``prefix``), and ``examples`` maps a
    path to a short text of its value in the sample data."""

    prefix: str
    label: str
    fields: list[FieldInfo]
    examples: dict[str, str] = {}


class Preview(msgspec.Struct, frozen=True):
    """The result of a preview: ``value`` (JSON; ``None`` when nothing matched), or
    ``error`` (``message``, ``position`` 0-based or ``None``, ``code``, ``limit``) when it
    failed; ``diagnostics`` of the paths it reads; ``data_from`` says which data it ran on
    (``"run <id>"``, ``"pinned data"``, or ``None`` when there was none)."""

    value: Any = None
    error: dict[str, Any] | None = None
    diagnostics: list[Diagnostic] = []
    data_from: str | None = None


async def last_run_sample(session: AsyncSession, workflow_id: uuid.UUID) -> RunSample:
    """The data of the workflow's newest run; values stored by reference are read back
    whole. Without runs, the last webhook test call (docs/webhooks.md) is the trigger
    output, and there are no step values."""
    run = (
        await session.execute(
            select(Run)
            .where(Run.workflow_id == workflow_id)
            .order_by(Run.created_at.desc())
            .limit(1)
        )
    ).scalar_one_or_none()
    if run is None:
        call = await webhooks.last_test_call(session, workflow_id)
        trigger = call.input if call is not None and call.error is None else None
        return RunSample(workflow_id=str(workflow_id), trigger=trigger)
    steps = (await session.execute(select(StepRun).where(StepRun.run_id == run.id))).scalars().all()
    values = await payloads.resolve_values(
        session, [run.input, {s.step_id: [s.input, s.output] for s in steps}]
    )
    trigger, by_step = values
    return RunSample(
        run_id=str(run.id),
        workflow_id=str(run.workflow_id),
        version=run.version_number,
        trigger=trigger,
        inputs={sid: pair[0] for sid, pair in by_step.items() if pair[0] is not None},
        outputs={sid: pair[1] for sid, pair in by_step.items() if pair[1] is not None},
    )


def _with_trigger(sample: RunSample, flow: DataFlow) -> RunSample:
    """``sample`` with the trigger's output among the step outputs (a test call has none)."""
    if flow.trigger is None or flow.trigger in sample.outputs or sample.trigger is None:
        return sample
    return sample.pinned({flow.trigger: sample.trigger})


def _flow(
    diagram: Diagram, catalog: Catalog, node_id: str, trigger_input: dict[str, Any] | None = None
) -> DataFlow:
    flow = DataFlow.of_diagram(diagram, catalog, _READER, trigger_input)
    if (
        node_id not in {n.id for n in diagram.nodes}
        or catalog.get(_type_of(diagram, node_id)) is None
    ):
        raise NodeNotFound(node_id)
    return flow


def _type_of(diagram: Diagram, node_id: str) -> str:
    return next((n.type for n in diagram.nodes if n.id == node_id), "")


def _step_input(diagram: Diagram, catalog: Catalog, node_id: str, sample: RunSample) -> Any:
    """The node's input in ``sample``, by the engine's rule: the output of the one source
    that ran, or the object keyed by the sources that ran (always keyed for a Join); the
    input the run recorded when no source output is known."""
    sources = list(
        dict.fromkeys(
            e.source for e in diagram.edges if e.target == node_id and e.source in sample.outputs
        )
    )
    spec = catalog.get(_type_of(diagram, node_id))
    keyed = spec is not None and spec.config_join
    if len(sources) == 1 and not keyed:
        return sample.outputs[sources[0]]
    if sources:
        return {s: sample.outputs[s] for s in sources}
    return sample.inputs.get(node_id)


def _bindings(sample: RunSample, flow: DataFlow) -> dict[str, Any]:
    trigger = sample.outputs.get(flow.trigger, sample.trigger) if flow.trigger else sample.trigger
    return {
        "trigger": trigger,
        "steps": dict(sample.outputs),
        "run": {"id": sample.run_id, "workflow_id": sample.workflow_id, "version": sample.version},
    }


def _example(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 1] + "…"


def _examples(fields: list[FieldInfo], data: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for info in fields:
        value: Any = data
        for part in info.path.split("."):
            part = part.strip("`")
            if isinstance(value, list):
                value = [v.get(part) for v in value if isinstance(v, dict)]
            elif isinstance(value, dict):
                value = value.get(part)
            else:
                value = None
            if value is None:
                break
        if value is not None:
            found[info.path] = _example(value)
    return found


def _merged_fields(schema: dict[str, Any], data: Any) -> list[FieldInfo]:
    fields = list_fields(schema)
    if data is not None:
        known = {f.path for f in fields}
        fields += [f for f in list_fields(value_schema(data)) if f.path not in known]
    return fields


async def callers_input(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    diagram: Diagram,
    catalog: Catalog,
    principal: Principal,
) -> child_contracts.InferredInput | None:
    """The run input's schema of ``diagram`` (the draft of ``workflow_id``) inferred from
    those of its callers ``principal`` may read, when its trigger declares none
    (:mod:`backend.services.workflows.child_contracts`)."""
    return await child_contracts.inferred_input(
        session, workflow_id, diagram, catalog, _READER, principal
    )


def child_input(diagram: Diagram, catalog: Catalog, node_id: str) -> dict[str, Any] | None:
    """The JSON Schema of what each child run of call node ``node_id`` (For each,
    Sub-workflow) receives, inferred from the diagram (``None`` for other nodes). Raises
    :class:`NodeNotFound` for an unknown node id."""
    return _flow(diagram, catalog, node_id).child_input(node_id)


def available_fields(
    diagram: Diagram,
    catalog: Catalog,
    node_id: str,
    sample: RunSample,
    trigger_input: dict[str, Any] | None = None,
) -> list[FieldSource]:
    """The picker's groups for ``node_id``: its input, the trigger, each upstream step (in
    diagram order) and the run; ``trigger_input`` is the run input's schema inferred from
    the workflow's callers, if any (:mod:`backend.services.workflows.child_contracts`). Raises
    :class:`NodeNotFound` for an unknown node id."""
    flow = _flow(diagram, catalog, node_id, trigger_input)
    sample = _with_trigger(sample, flow)
    context = flow.context(node_id)
    bindings = _bindings(sample, flow)
    data = _step_input(diagram, catalog, node_id, sample)
    groups = [
        ("", "Input", context["$"], data),
        ("$trigger", "Trigger", context["$trigger"], bindings["trigger"]),
    ]
    upstream = flow.upstream(node_id)
    for node in diagram.nodes:
        if node.id in upstream:
            label = f"Step {node.label or node.id}"
            groups.append(
                (
                    f"$steps.{node.id}",
                    label,
                    flow.output_schema(node.id),
                    sample.outputs.get(node.id),
                )
            )
    groups.append(("$run", "Run", RUN_SCHEMA, bindings["run"] if sample.run_id else None))
    result = []
    for prefix, label, schema, value in groups:
        fields = _merged_fields(schema, value)
        result.append(
            FieldSource(
                prefix, label, fields, _examples(fields, value) if value is not None else {}
            )
        )
    return result


async def preview(
    diagram: Diagram,
    catalog: Catalog,
    node_id: str,
    source: str,
    sample: RunSample,
    *,
    data_from: str | None = None,
    trigger_input: dict[str, Any] | None = None,
) -> Preview:
    """Evaluate ``source`` (with or without its leading ``=``) as an expression of
    ``node_id`` against ``sample``, in a worker thread, with the run limits; ``data_from``
    names that data in the answer (default: the sample's run); ``trigger_input`` as for
    :func:`available_fields`. Raises :class:`NodeNotFound` for an unknown node id."""
    flow = _flow(diagram, catalog, node_id, trigger_input)
    sample = _with_trigger(sample, flow)
    text = source[1:] if source.startswith("=") else source
    if data_from is None and sample.run_id:
        data_from = f"run {sample.run_id}"
    try:
        compiled = compile_expression(text)
    except ExpressionError as err:
        return Preview(error=_error(err), data_from=data_from)
    diagnostics = flow.check(node_id, {"expression": text})
    data = _step_input(diagram, catalog, node_id, sample)
    bindings = _bindings(sample, flow)
    try:
        value = await asyncio.to_thread(compiled.evaluate, data, bindings)
    except ExpressionError as err:
        return Preview(error=_error(err), diagnostics=diagnostics, data_from=data_from)
    return Preview(value=value, diagnostics=diagnostics, data_from=data_from)


def _error(err: ExpressionError) -> dict[str, Any]:
    return {"message": err.message, "position": err.position, "code": err.code, "limit": err.limit}


def infer_schema(sample: Any) -> dict[str, Any]:
    """A JSON Schema of ``sample`` (GenSON's inference: objects list their fields, all
    required; lists describe their items), without the ``$schema`` keyword."""
    builder = SchemaBuilder(schema_uri=None)
    builder.add_object(sample)
    schema = builder.to_schema()
    schema.pop("$schema", None)
    return dict(schema)


async def infer_body_schema(
    session: AsyncSession, workflow_id: uuid.UUID, source: str, sample: Any
) -> tuple[dict[str, Any], str]:
    """``(schema, origin)`` of a webhook body: ``source`` ``sample`` infers from
    ``sample``; ``test_call`` from the body of the last test call; ``last_run`` from the
    body of the newest run. Raises :class:`InvalidInput` (field ``source``) when that call
    or run does not exist or has no body."""
    if source == "sample":
        return infer_schema(sample), "sample"
    if source == "test_call":
        call = await webhooks.last_test_call(session, workflow_id)
        request = call.input if call is not None and call.error is None else None
        origin = "test call"
    else:
        found = await last_run_sample(session, workflow_id)
        request = found.trigger if found.run_id is not None else None
        origin = f"run {found.run_id}"
    if not isinstance(request, dict) or "body" not in request:
        what = "test call" if source == "test_call" else "run with a request body"
        raise InvalidInput(f"there is no {what} yet", field="source")
    return infer_schema(request["body"]), origin
