"""What a workflow's callers send it, and whether the children a workflow calls read only that.

A For each or Sub-workflow step (:data:`~backend.services.identity.references.CALL_NODE_TYPES`)
sends each child run an input whose schema its workflow's data flow infers
(:meth:`designer_schema.dataflow.DataFlow.child_input`: ``{item, index, input}`` for a
For each, the input mapping's shape for a Sub-workflow). Two uses of it:

- :func:`inferred_input`: a workflow whose Manual trigger declares no Input schema takes,
  as the schema of its run input, what its callers send: the union over every call step
  naming it (a literal ``workflow_id``) in the drafts of the other workflows that are not
  archived (the designer edits drafts; a published caller was a draft first). The field
  picker, typed mappings and the condition builder then work inside the child, and a
  path it reads that no caller sends is an ``unknown_field`` error there as with a
  declared schema. A declared Input schema always wins. For a person (the field picker,
  previews, the diagnostics of their save, compile and publish, which list the known
  fields), only the callers that person may read count: a caller's field names are its
  content. The lookup is one index scan (``ix_workflows_called``, the
  called ids of each draft; migration 0032).
- :func:`call_diagnostics`: at a caller's save, compile and publish, every child it calls
  is checked in the version the call will run (the pinned ``version``, else the child's
  active version; a child never published, missing or archived is skipped: the
  reference warnings say so). The child's diagram is compiled by the same compiler that
  checked its own publish, once as published and once with this call's input as its run
  input (``trigger_input``); every ``unknown_field`` or ``wrong_type`` error only the
  second compile reports is an error ``child_contract`` on the call step (field
  ``workflow_id``), naming the child, its version, its step and field. Children whose
  trigger does not take a typed run input (a webhook trigger describes its own output)
  are not checked.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

import msgspec
from sqlalchemy import ColumnElement, bindparam, select, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Principal
from backend.db.models import Workflow, WorkflowVersion
from backend.db.versions import PUBLISHED
from backend.services.identity import access
from backend.services.identity.references import CALL_NODE_TYPES
from designer_schema.catalog import Catalog, ExpressionChecker
from designer_schema.compiler import compile_diagram
from designer_schema.dataflow import INPUT_CODES, DataFlow, ExpressionReader, declares_input
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import Diagram
from designer_schema.schema_paths import union

__all__ = [
    "CHILD_CONTRACT",
    "CallSite",
    "InferredInput",
    "call_diagnostics",
    "callers",
    "inferred_input",
]

CHILD_CONTRACT: Final = "child_contract"
"""The code of a call whose child reads fields the call does not send (an error)."""

_NODE_LABELS: Final = {"control.foreach": "For each", "control.subworkflow": "Sub-workflow"}

# The called ids of a draft, as the expression of index ix_workflows_called (migration
# 0032, which must spell it the same): PostgreSQL uses an expression index only for the
# same expression, with the path a literal.
_CALLS: Final = text(
    "jsonb_path_query_array(workflows.draft, '$.nodes[*].config.workflow_id') @> :called"
).bindparams(bindparam("called", type_=JSONB))


@dataclass(frozen=True)
class CallSite:
    """One call step naming the workflow: the calling ``workflow_id`` and its name
    (``workflow``), the step's ``node_id``, ``step``
    (its label, else its id), ``kind`` ("For each" or "Sub-workflow") and the JSON Schema
    of what it sends (``schema``)."""

    workflow_id: str
    workflow: str
    node_id: str
    step: str
    kind: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class InferredInput:
    """The schema of a workflow's run input inferred from its callers (``sources``)."""

    schema: dict[str, Any]
    sources: list[CallSite]


def _diagram(value: Any) -> Diagram | None:
    try:
        return msgspec.convert(value, Diagram)
    except msgspec.ValidationError:
        return None


async def callers(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    catalog: Catalog,
    reader: ExpressionReader,
    visible: ColumnElement[bool] | None = None,
) -> list[CallSite]:
    """The call steps naming ``workflow_id`` in the drafts of the other non-archived
    workflows (of those ``visible``, a filter over ``Workflow``, keeps), by workflow name,
    each with the schema of what it sends."""
    target = str(workflow_id)
    query = (
        select(Workflow.id, Workflow.name, Workflow.draft)
        .where(
            _CALLS.bindparams(called=[target]),
            Workflow.archived_at.is_(None),
            Workflow.id != workflow_id,
        )
        .order_by(Workflow.name, Workflow.id)
    )
    rows = await session.execute(query if visible is None else query.where(visible))
    sites: list[CallSite] = []
    for caller_id, name, draft in rows:
        diagram = _diagram(draft)
        if diagram is None:
            continue
        flow = DataFlow.of_diagram(diagram, catalog, reader)
        for node in diagram.nodes:
            if node.type not in CALL_NODE_TYPES or node.config.get("workflow_id") != target:
                continue
            schema = flow.child_input(node.id)
            if schema is not None:
                kind = _NODE_LABELS.get(node.type, node.type)
                sites.append(
                    CallSite(str(caller_id), name, node.id, node.label or node.id, kind, schema)
                )
    return sites


async def inferred_input(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    diagram: Diagram,
    catalog: Catalog,
    reader: ExpressionReader,
    principal: Principal | None = None,
) -> InferredInput | None:
    """What ``diagram`` (the draft of ``workflow_id``) receives from its callers, when its
    trigger takes a typed run input and declares no schema itself; ``None`` otherwise or
    when nothing calls it. With ``principal``, from the callers it may read only (what a
    person is shown: nothing of a workflow hidden from them)."""
    if declares_input(diagram, catalog) is not False:
        return None
    visible = None if principal is None else await access.workflow_filter(session, principal)
    sites = await callers(session, workflow_id, catalog, reader, visible)
    if not sites:
        return None
    return InferredInput(union([site.schema for site in sites]), sites)


def _uuid(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        return None


async def _called_version(
    session: AsyncSession, child: Workflow, pinned: Any
) -> WorkflowVersion | None:
    number = pinned if isinstance(pinned, int) and not isinstance(pinned, bool) else None
    number = child.active_version if number is None else number
    if number is None:
        return None
    return (
        await session.execute(
            select(WorkflowVersion).where(
                WorkflowVersion.workflow_id == child.id,
                WorkflowVersion.number == number,
                WorkflowVersion.kind == PUBLISHED,
            )
        )
    ).scalar_one_or_none()


async def call_diagnostics(
    session: AsyncSession,
    diagram: Diagram,
    catalog: Catalog,
    checker: ExpressionChecker,
    reader: ExpressionReader,
) -> list[Diagnostic]:
    """``child_contract`` errors for the children ``diagram`` calls that read fields their
    call does not send (see the module docstring), in diagram order."""
    calls = [
        (node, wid)
        for node in diagram.nodes
        if node.type in CALL_NODE_TYPES and (wid := _uuid(node.config.get("workflow_id")))
    ]
    if not calls:
        return []
    children = {
        wf.id: wf
        for wf in (
            await session.execute(
                select(Workflow).where(
                    Workflow.id.in_({wid for _, wid in calls}), Workflow.archived_at.is_(None)
                )
            )
        ).scalars()
    }
    flow = DataFlow.of_diagram(diagram, catalog, reader)
    found: list[Diagnostic] = []
    for node, wid in calls:
        child = children.get(wid)
        version = (
            None
            if child is None
            else await _called_version(session, child, node.config.get("version"))
        )
        sent = flow.child_input(node.id)
        called = None if version is None else _diagram(version.diagram)
        if child is None or version is None or not sent or called is None:
            continue
        if declares_input(called, catalog) is None:
            continue
        found.extend(
            _lacking(node.id, child.name, version.number, called, catalog, checker, reader, sent)
        )
    return found


def _lacking(
    node_id: str,
    name: str,
    number: int,
    called: Diagram,
    catalog: Catalog,
    checker: ExpressionChecker,
    reader: ExpressionReader,
    sent: dict[str, Any],
) -> list[Diagnostic]:
    """The errors of ``called`` with ``sent`` as its run input that it does not have as
    published, as ``child_contract`` errors on the call step ``node_id``."""
    _, own = compile_diagram(called, catalog, checker, reader)
    _, with_call = compile_diagram(called, catalog, checker, reader, trigger_input=sent)
    known = {(d.node_id, d.field, d.message) for d in own}
    labels = {node.id: node.label or node.id for node in called.nodes}
    return [
        Diagnostic(
            "error",
            CHILD_CONTRACT,
            f"the called workflow {name!r} (version {number}) reads what this call does not "
            f"send: step {labels.get(d.node_id or '', d.node_id)!r}, field {d.field}: {d.message}",
            node_id,
            None,
            "workflow_id",
        )
        for d in with_call
        if d.severity == "error"
        and d.code in INPUT_CODES
        and (d.node_id, d.field, d.message) not in known
    ]
