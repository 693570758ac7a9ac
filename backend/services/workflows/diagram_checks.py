"""Diagnostics that need the database: what a diagram's references point at.

The compiler (:mod:`designer_schema.compiler`) is pure and cannot see credentials or other
workflows, so :func:`check` compiles and then adds, for every literal reference
(:func:`backend.services.identity.references.references`):

- ``credential_type`` (error): the credential is of a type the field does not accept (an
  SMTP login in a Slack step would fail at run time with a confusing error);
- ``credential_missing`` (warning): the credential id names no saved credential;
- ``workflow_missing`` (warning): a Sub-workflow or For each step names a workflow that
  does not exist;
- ``workflow_archived`` (warning): it names an archived workflow (which starts no runs
  until it is restored);

and, for the trigger (:func:`trigger_diagnostics`), ``trigger_unrunnable`` (error): a
connector trigger whose kind nothing in Railyard runs, and ``invalid_config`` (error, on
the field the trigger names): a literal config its ``validate`` hook refuses (a broker
URL with another scheme or with a password in it), which would fail at every reconnect;
``invalid_config`` (error, on the field) too for a Webhook trigger whose config does not
decode into its :class:`~backend.engine.nodes.trigger_webhook.WebhookConfig` (a
``tolerance`` of 0, a negative ``max_body``, a wrong type), which the endpoint could not
serve (:func:`webhook_config_diagnostic`).

Before them, for a diagram that compiles, ``invalid_config`` (error, on the field) for a
step's literal config that its node type's config Struct refuses
(:mod:`backend.services.workflows.config_checks`).

The missing and archived cases are warnings, not errors: an archived workflow can be
restored before a run needs it, and a reference can be fixed after publishing; until then
the step fails at run time with an error that says why.

Existence is told without regard to permission (a reference the author may not use is
refused at save and publish with 403 by :func:`backend.services.identity.references.check_diagram`).
The designer shows these with the compiler's diagnostics (live and at publish); an error
blocks publishing.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Permission, Principal
from backend.db.models import Credential, Workflow
from backend.engine.nodes.base import NodeError
from backend.engine.nodes.trigger_webhook import webhook_config
from backend.services.identity.references import references
from backend.services.triggers.events.kinds import unrunnable
from backend.services.triggers.webhook_versions import WEBHOOK_TRIGGER
from backend.services.workflows import child_contracts
from backend.services.workflows.config_checks import config_diagnostics
from connectors.sdk.credentials import credential_types_of_schema
from designer_schema.catalog import Catalog
from designer_schema.compiler import compile_diagram
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import Diagram
from designer_schema.graph import WorkflowGraph

REFERENCE_CODES: Final = (
    "credential_missing",
    "credential_type",
    "workflow_missing",
    "workflow_archived",
)
"""Codes of the diagnostics :func:`reference_diagnostics` emits."""


def _uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


async def reference_diagnostics(
    session: AsyncSession, diagram: Diagram | dict[str, Any], catalog: Catalog
) -> list[Diagnostic]:
    """Errors for references to missing or wrong-typed credentials and to missing or
    archived workflows, in diagram order (see the module docstring)."""
    refs = list(references(diagram, catalog))
    credential_ids = {
        u for _, _, oid, p in refs if p is Permission.CREDENTIAL_USE if (u := _uuid(oid))
    }
    workflow_ids = {u for _, _, oid, p in refs if p is Permission.WORKFLOW_RUN if (u := _uuid(oid))}
    credentials: dict[str, tuple[str, str]] = {}
    if credential_ids:
        rows = await session.execute(
            select(Credential.id, Credential.name, Credential.type).where(
                Credential.id.in_(credential_ids)
            )
        )
        credentials = {str(cid): (name, ctype) for cid, name, ctype in rows}
    workflows: dict[str, tuple[str, bool]] = {}
    if workflow_ids:
        rows2 = await session.execute(
            select(Workflow.id, Workflow.name, Workflow.archived_at).where(
                Workflow.id.in_(workflow_ids)
            )
        )
        workflows = {str(wid): (name, archived is not None) for wid, name, archived in rows2}

    types_of_node = {node_id: node_type for node_id, node_type, _ in _node_types(diagram)}
    found: list[Diagnostic] = []
    for node_id, field, object_id, permission in refs:
        if permission is Permission.CREDENTIAL_USE:
            spec = catalog.get(types_of_node.get(node_id, ""))
            accepted = credential_types_of_schema(spec.config_schema).get(field, ()) if spec else ()
            known = credentials.get(object_id)
            if known is None:
                found.append(
                    Diagnostic(
                        "warning",
                        "credential_missing",
                        f"credential {object_id} does not exist (deleted?): the step will fail; "
                        "choose another",
                        node_id,
                        None,
                        field,
                    )
                )
            elif accepted and known[1] not in accepted:
                found.append(
                    Diagnostic(
                        "error",
                        "credential_type",
                        f"credential {known[0]!r} is of type {known[1]!r}; this field takes "
                        + " or ".join(repr(t) for t in accepted),
                        node_id,
                        None,
                        field,
                    )
                )
        else:
            target = workflows.get(object_id)
            if target is None:
                found.append(
                    Diagnostic(
                        "warning",
                        "workflow_missing",
                        f"workflow {object_id} does not exist: the call will fail; choose another",
                        node_id,
                        None,
                        field,
                    )
                )
            elif target[1]:
                found.append(
                    Diagnostic(
                        "warning",
                        "workflow_archived",
                        f"workflow {target[0]!r} is archived and starts no runs: the call "
                        "will fail until it is restored; restore it or choose another",
                        node_id,
                        None,
                        field,
                    )
                )
    return found


def _node_types(diagram: Diagram | dict[str, Any]) -> list[tuple[str, str, Any]]:
    nodes = diagram.get("nodes", []) if isinstance(diagram, dict) else diagram.nodes
    out = []
    for node in nodes or ():
        if isinstance(node, dict):
            out.append((str(node.get("id")), str(node.get("type")), node.get("config")))
        else:
            out.append((node.id, node.type, node.config))
    return out


def trigger_diagnostics(diagram: Diagram, catalog: Catalog) -> list[Diagnostic]:
    """``trigger_unrunnable`` (error) on a connector trigger nothing in Railyard can run
    (:func:`backend.services.triggers.events.kinds.unrunnable`): publishing it would start no run,
    ever, so it is refused instead; ``invalid_config`` (error) on a trigger whose literal
    config its ``validate`` hook refuses (:func:`config_diagnostic`) and on a Webhook
    trigger whose config does not decode (:func:`webhook_config_diagnostic`)."""
    triggers: dict[str, Any] = getattr(catalog, "triggers", {})
    found = []
    for node in diagram.nodes:
        if node.type == WEBHOOK_TRIGGER:
            bad = webhook_config_diagnostic(node.id, node.config)
            found.extend([bad] if bad is not None else [])
            continue
        definition = triggers.get(node.type)
        if definition is None:
            continue
        problem = unrunnable(definition)
        if problem is not None:
            found.append(Diagnostic("error", "trigger_unrunnable", problem, node.id, None, None))
            continue
        refused = config_diagnostic(definition, node.id, node.config, catalog)
        if refused is not None:
            found.append(refused)
    return found


def webhook_config_diagnostic(node_id: str, config: Any) -> Diagnostic | None:
    """``invalid_config`` (error, ``field`` the config field at fault, e.g. ``tolerance``)
    when a Webhook trigger's ``config`` does not decode as its newest version (what a
    publish pins) would be served; ``None`` when it does (or is no dict: the compiler
    reports that)."""
    if not isinstance(config, dict):
        return None
    try:
        webhook_config(config)
    except NodeError as exc:
        return Diagnostic("error", "invalid_config", str(exc), node_id, None, exc.field)
    return None


def config_diagnostic(
    definition: Any, node_id: str, config: Any, catalog: Catalog
) -> Diagnostic | None:
    """``invalid_config`` (error) when the trigger ``definition``'s ``validate`` hook
    refuses ``config`` (the message is the hook's; ``field`` is the one its
    :class:`~connectors.sdk.ConfigError` names in ``details["field"]``, else ``None``).
    ``None`` when it passes, when ``config`` holds an expression (only literal values are
    checked) and for a definition without the hook."""
    check = getattr(definition, "config_problem", None)
    if check is None or not isinstance(config, dict):
        return None
    spec = catalog.get(getattr(definition, "type", ""))
    expression_fields = spec.expression_fields if spec is not None else ()
    if any(
        isinstance(config.get(name), str) and str(config[name]).startswith("=")
        for name in expression_fields
    ):
        return None
    error = check(config)
    if error is None:
        return None
    field = error.details.get("field")
    return Diagnostic(
        "error",
        "invalid_config",
        error.message,
        node_id,
        None,
        field if isinstance(field, str) else None,
    )


async def check(
    session: AsyncSession,
    diagram: Diagram,
    catalog: Catalog,
    checker: Any,
    reader: Any = None,
    workflow_id: uuid.UUID | None = None,
    principal: Principal | None = None,
) -> tuple[WorkflowGraph | None, list[Diagnostic]]:
    """Compile ``diagram`` (expression syntax by ``checker``, expression paths against the
    upstream output schemas by ``reader`` when given) and add, when it compiled, the
    literal configs its Structs refuse
    (:func:`backend.services.workflows.config_checks.config_diagnostics`),
    then :func:`trigger_diagnostics` and :func:`reference_diagnostics`;
    the graph is ``None`` when any diagnostic is an error.

    With ``reader``, the children the diagram calls are checked against what it sends
    them (:func:`backend.services.workflows.child_contracts.call_diagnostics`), and with
    ``workflow_id`` (the diagram is that workflow's draft) a trigger declaring no input
    schema is typed by what its callers send
    (:func:`backend.services.workflows.child_contracts.inferred_input`): those ``principal`` may
    read when given (the diagnostics go to that person), else every caller."""
    inferred = None
    if reader is not None and workflow_id is not None:
        inferred = await child_contracts.inferred_input(
            session, workflow_id, diagram, catalog, reader, principal
        )
    graph, diagnostics = compile_diagram(
        diagram, catalog, checker, reader, inferred.schema if inferred else None
    )
    extra = [
        *(config_diagnostics(graph, catalog) if graph is not None else []),
        *trigger_diagnostics(diagram, catalog),
        *await reference_diagnostics(session, diagram, catalog),
    ]
    if reader is not None:
        extra.extend(
            await child_contracts.call_diagnostics(session, diagram, catalog, checker, reader)
        )
    if extra:
        diagnostics = [*diagnostics, *extra]
        if any(d.severity == "error" for d in extra):
            graph = None
    return graph, diagnostics
