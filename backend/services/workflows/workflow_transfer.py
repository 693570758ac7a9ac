"""Export a workflow (its draft or a version) as a ``railyard/workflow`` document, and import
one as a new workflow or into an existing workflow's draft (the format:
:mod:`designer_schema.transfer`, docs/designer.md "Import and export").

Export takes every credential and called-workflow reference out of the node configs and
lists it by name (and credential type); no secret is ever in a diagram, so none is in the
document. Import binds each reference again for the importing user:

1. by ``id`` when it names a credential of the same type (a workflow) that the importer may
   use (run) in this installation;
2. else by name (and type) among those the importer may use: one match binds it;
3. else the field is left empty and a ``warning`` diagnostic on the node and field asks to
   pick one (``import_credential_missing``, ``import_credential_ambiguous``,
   ``import_workflow_missing``, ``import_workflow_ambiguous``).

A credential or workflow id found in a node config but not listed as a reference is taken
out too (``import_unlisted_reference``): an import never binds an id by accident.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Level, Permission, Principal
from backend.db.models import Workflow
from backend.db.models.credentials import Credential
from backend.services import audit
from backend.services.connectors import credentials as creds
from backend.services.errors import InvalidInput
from backend.services.identity import access, references
from backend.services.workflows import workflow_versions, workflows
from connectors.sdk.credentials import credential_types_of_schema
from designer_schema.catalog import Catalog
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import Diagram
from designer_schema.limits import DiagramLimits
from designer_schema.transfer import (
    EXPORT_FORMAT,
    EXPORT_FORMAT_VERSION,
    SETTINGS_WORKFLOW_FIELD,
    CredentialRef,
    ExportedWorkflow,
    ExportSource,
    TransferError,
    WorkflowExport,
    WorkflowRef,
    check_export,
    with_fields,
    without_fields,
)

EXPORTED_SETTINGS = ("run_timeout_seconds", "max_concurrent_runs")
"""Run-control settings copied into an export (the error workflow is a reference)."""


def _uuids(values: Sequence[str]) -> list[uuid.UUID]:
    out = []
    for value in values:
        try:
            out.append(uuid.UUID(value))
        except ValueError:
            continue
    return out


async def export_workflow(
    session: AsyncSession,
    catalog: Catalog,
    workflow_id: uuid.UUID,
    ref: int | str,
    base_url: str,
) -> WorkflowExport:
    """The export document of the workflow's draft (``ref`` :data:`~backend.services.
    workflow_versions.DRAFT`) or version ``ref``, with the workflow's current name,
    description and run-control settings. Raises
    :class:`~backend.services.workflows.workflows.WorkflowNotFound`."""
    wf = await workflows.get_workflow(session, workflow_id)
    diagram = await workflow_versions.diagram_at(session, wf, ref)
    found = list(references.references(diagram, catalog))
    error_wf = (wf.settings or {}).get("error_workflow_id")
    ids = _uuids([oid for *_, oid, _ in found] + ([str(error_wf)] if error_wf else []))
    cred_rows = {
        str(r.id): r
        for r in (await session.execute(select(Credential).where(Credential.id.in_(ids)))).scalars()
    }
    wf_names = {
        str(i): n
        for i, n in await session.execute(
            select(Workflow.id, Workflow.name).where(Workflow.id.in_(ids))
        )
    }
    credentials: list[CredentialRef] = []
    called: list[WorkflowRef] = []
    for node_id, config_field, object_id, permission in found:
        if permission is Permission.CREDENTIAL_USE:
            row = cred_rows.get(object_id)
            ctype = row.type if row is not None else _declared_type(diagram, catalog, node_id)
            name = row.name if row is not None else None
            credentials.append(CredentialRef(node_id, config_field, ctype, name, object_id))
        else:
            called.append(WorkflowRef(config_field, node_id, wf_names.get(object_id), object_id))
    if error_wf:
        called.append(
            WorkflowRef(SETTINGS_WORKFLOW_FIELD, None, wf_names.get(str(error_wf)), str(error_wf))
        )
    slots = {(r.node, r.field) for r in credentials} | {
        (r.node, r.field) for r in called if r.node is not None
    }
    settings = {k: v for k, v in (wf.settings or {}).items() if k in EXPORTED_SETTINGS}
    return WorkflowExport(
        format=EXPORT_FORMAT,
        format_version=EXPORT_FORMAT_VERSION,
        workflow=ExportedWorkflow(wf.name, wf.description, settings),
        diagram=without_fields(diagram, slots),
        credentials=credentials,
        workflows=called,
        exported_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        source=ExportSource(
            base_url, str(wf.id), None if ref == workflow_versions.DRAFT else int(ref)
        ),
    )


def _declared_type(diagram: Diagram, catalog: Catalog, node_id: str) -> str:
    """The first credential type a node's type accepts (for a reference whose credential
    was deleted)."""
    node = next(n for n in diagram.nodes if n.id == node_id)
    spec = catalog.get(node.type)
    accepted = credential_types_of_schema(spec.config_schema) if spec else {}
    return next(iter(accepted.values()), ("",))[0]


@dataclass
class ImportPlan:
    """What an import will store: the diagram with references bound for the importer, the
    settings (``error_workflow_id`` only when bound) and what needs the user's attention."""

    document: WorkflowExport
    diagram: Diagram
    settings: dict[str, Any]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    bound: int = 0


def _pick(
    candidates: list[tuple[str, str]], ref_id: str | None, name: str | None
) -> tuple[str | None, int]:
    """``(bound id, matches by name)`` among ``(id, name)`` candidates: the id when it is
    one of them, else the only candidate with that name."""
    if ref_id and any(cid == ref_id for cid, _ in candidates):
        return ref_id, 1
    same = [cid for cid, cname in candidates if name is not None and cname == name]
    return (same[0] if len(same) == 1 else None), len(same)


def _warning(code: str, message: str, node: str | None, where: str) -> Diagnostic:
    return Diagnostic("warning", code, message, node, None, where)


async def plan_import(
    session: AsyncSession,
    principal: Principal,
    catalog: Catalog,
    doc: WorkflowExport,
    limits: DiagramLimits,
) -> ImportPlan:
    """Check an export document (decoded; :func:`designer_schema.transfer.check_export`)
    and bind its references for ``principal``. Raises
    :class:`~backend.services.errors.InvalidInput` (a 400) naming the place for a
    document this Railyard cannot read or that is over a diagram limit."""
    try:
        check_export(doc)
    except TransferError as exc:
        raise InvalidInput(exc.message, exc.path) from None
    try:
        workflows.check_diagram_limits(doc.diagram, limits)
    except InvalidInput as exc:
        raise InvalidInput(str(exc), f"$.diagram.{exc.field}") from None
    listed = {(r.node, r.field) for r in doc.credentials} | {
        (r.node, r.field) for r in doc.workflows
    }
    diagnostics: list[Diagnostic] = []
    stray: set[tuple[str, str]] = set()
    for node_id, config_field, _, _ in references.references(doc.diagram, catalog):
        if (node_id, config_field) not in listed:
            stray.add((node_id, config_field))
            diagnostics.append(
                _warning(
                    "import_unlisted_reference",
                    "this field held an id that the document does not list as a reference; "
                    "it was left empty: pick one",
                    node_id,
                    config_field,
                )
            )
    usable_creds = await creds.list_credentials(
        session, catalog, None, await access.credential_filter(session, principal)
    )
    runnable = await workflows.list_workflows(
        session, await access.workflow_filter(session, principal, Level.RUN)
    )
    values: dict[tuple[str, str], Any] = {slot: None for slot in stray}
    settings = {k: v for k, v in doc.workflow.settings.items() if k != "error_workflow_id"}
    bound = 0
    for c in doc.credentials:
        candidates = [(v.id, v.name) for v in usable_creds if v.type == c.type]
        chosen, matches = _pick(candidates, c.id, c.name)
        values[(c.node, c.field)] = chosen
        if chosen is not None:
            bound += 1
            continue
        what = f"credential {c.name!r} ({c.type})" if c.name else f"a {c.type} credential"
        if matches > 1:
            diagnostics.append(
                _warning(
                    "import_credential_ambiguous",
                    f"{matches} credentials you may use are named {c.name!r} ({c.type}): pick one",
                    c.node,
                    c.field,
                )
            )
        else:
            diagnostics.append(
                _warning(
                    "import_credential_missing",
                    f"{what} is not here or not yours to use: pick a credential",
                    c.node,
                    c.field,
                )
            )
    wf_candidates = [(str(w.id), w.name) for w in runnable]
    for w in doc.workflows:
        chosen, matches = _pick(wf_candidates, w.id, w.name)
        if chosen is not None:
            bound += 1
            if w.node is None:
                settings["error_workflow_id"] = chosen
            else:
                values[(w.node, w.field)] = chosen
            continue
        if w.node is not None:
            values[(w.node, w.field)] = None
        what = f"workflow {w.name!r}" if w.name else "the called workflow"
        code, message = (
            ("import_workflow_ambiguous", f"{matches} workflows you may run are named {w.name!r}")
            if matches > 1
            else ("import_workflow_missing", f"{what} is not here or you may not run it")
        )
        diagnostics.append(_warning(code, f"{message}: pick one", w.node, w.field))
    return ImportPlan(doc, with_fields(doc.diagram, values), settings, diagnostics, bound)


async def _audit_import(
    session: AsyncSession, workflow_id: uuid.UUID, plan: ImportPlan, into: str
) -> None:
    source = plan.document.source
    await audit.record(
        session,
        "workflow.import",
        "workflow",
        workflow_id,
        after={
            "nodes": len(plan.diagram.nodes),
            "edges": len(plan.diagram.edges),
        },
        details={
            "into": into,
            "format_version": plan.document.format_version,
            "source": msgspec.to_builtins(source) if source else None,
            "references_bound": plan.bound,
            "references_unbound": len(plan.diagnostics),
        },
    )


async def import_new(
    session: AsyncSession,
    plan: ImportPlan,
    catalog: Catalog,
    user_id: uuid.UUID,
    name: str | None = None,
) -> tuple[Workflow, workflows.DraftSaved]:
    """Create a workflow from ``plan`` (named ``name`` or as exported), owned by
    ``user_id``, with the plan's settings and diagram as its draft; audited as
    ``workflow.create`` and ``workflow.import``. Raises
    :class:`~backend.services.errors.InvalidInput` for a bad name or setting."""
    doc = plan.document
    wf = await workflows.create_workflow(
        session, name or doc.workflow.name, user_id, doc.workflow.description
    )
    if plan.settings:
        await workflows.update_settings(session, wf.id, plan.settings)
    saved = await workflows.save_draft(session, wf.id, plan.diagram, catalog, user_id=user_id)
    await _audit_import(session, wf.id, plan, "new")
    return wf, saved


async def import_into_draft(
    session: AsyncSession,
    plan: ImportPlan,
    catalog: Catalog,
    workflow_id: uuid.UUID,
    user_id: uuid.UUID,
    base_revision: int | None,
    principal: Principal | None = None,
) -> workflows.DraftSaved:
    """Replace the draft of ``workflow_id`` with the plan's diagram (a draft save based on
    ``base_revision``: :class:`~backend.services.workflows.workflows.DraftConflict` when the draft
    moved on); name and settings stay. Audited as ``workflow.import``. The diagnostics are
    ``principal``'s (a child typed by the callers that person may read)."""
    saved = await workflows.save_draft(
        session,
        workflow_id,
        plan.diagram,
        catalog,
        base_revision=base_revision,
        user_id=user_id,
        principal=principal,
    )
    await _audit_import(session, workflow_id, plan, "draft")
    return saved
