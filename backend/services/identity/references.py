"""What a workflow references (credentials, and workflows it calls as Sub-workflow or
For-each steps) and whether its author may use them.

A workflow may reference a credential only if the user saving it (new references), the
user publishing it (every reference) and, at run time, the publisher of the running
version may use it (``credential:use``); the same holds for called workflows with
``workflow:run``. A grant revoked after publishing stops the next step using the
credential with the non-retryable error kind ``credential_not_granted``, and the next call
of the workflow with ``subworkflow_not_granted``.

Credential references are the node config fields whose schema carries
``x-credential-type`` (:func:`connectors.sdk.credential_types_of_schema`); workflow
references the ``workflow_id`` of :data:`CALL_NODE_TYPES` (an expression there is checked
at run time only).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Decision, Permission, Principal, decide
from backend.db.models import Run, User, WorkflowVersion
from backend.services.identity import access
from connectors.sdk.credentials import credential_types_of_schema

CALL_NODE_TYPES = frozenset({"control.subworkflow", "control.foreach"})


class ReferenceNotGranted(PermissionError):
    """A diagram references a credential or workflow its author may not use (403):
    ``node_id`` and ``field`` say where."""

    def __init__(self, message: str, node_id: str, field: str) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.field = field


def _nodes(diagram: Any) -> Iterator[tuple[str, str, dict[str, Any]]]:
    nodes = diagram.get("nodes", []) if isinstance(diagram, dict) else diagram.nodes
    for node in nodes or ():
        if isinstance(node, dict):
            node_id, node_type, config = node.get("id"), node.get("type"), node.get("config")
        else:
            node_id, node_type, config = node.id, node.type, node.config
        if isinstance(config, dict):
            yield str(node_id), str(node_type), config


def references(diagram: Any, catalog: Any) -> Iterator[tuple[str, str, str, Permission]]:
    """``(node id, config field, object id, permission needed)`` of every credential and
    called workflow a diagram names (the draft/version dict or a Diagram struct)."""
    for node_id, node_type, config in _nodes(diagram):
        if node_type in CALL_NODE_TYPES:
            value = config.get("workflow_id")
            if isinstance(value, str) and value and not value.startswith("="):
                yield node_id, "workflow_id", value, Permission.WORKFLOW_RUN
        spec = catalog.get(node_type)
        if spec is None:
            continue
        for field in credential_types_of_schema(spec.config_schema):
            value = config.get(field)
            if isinstance(value, str) and value:
                yield node_id, field, value, Permission.CREDENTIAL_USE


async def may(
    session: AsyncSession, principal: Principal, permission: Permission, object_id: str
) -> bool | None:
    """Whether ``principal`` holds ``permission`` (credential use or workflow run) on the
    object; None when the object does not exist (the compiler and engine report that)."""
    if permission is Permission.CREDENTIAL_USE:
        obj = await access.credential_access(session, object_id)
    else:
        obj = await access.workflow_access(session, object_id)
    if obj is None:
        return None
    return decide(principal, permission, obj) is Decision.ALLOW


async def check_diagram(
    session: AsyncSession,
    principal: Principal,
    diagram: Any,
    catalog: Any,
    *,
    previous: Any = None,
) -> None:
    """Raise :class:`ReferenceNotGranted` for the first reference of ``diagram`` the
    principal may not use; references already in ``previous`` (the stored draft) are not
    checked again (saving keeps what others put there; publishing checks all)."""
    known = set(references(previous, catalog)) if previous else set()
    for ref in references(diagram, catalog):
        if ref in known:
            continue
        node_id, field, object_id, permission = ref
        if await may(session, principal, permission, object_id) is False:
            what = "credential" if permission is Permission.CREDENTIAL_USE else "workflow"
            verb = "use" if permission is Permission.CREDENTIAL_USE else "run"
            raise ReferenceNotGranted(
                f"node {node_id!r} field {field!r}: you may not {verb} {what} {object_id}; "
                f"ask its owner or an admin for a {verb} grant",
                node_id,
                field,
            )


async def check_called_workflow(
    session: AsyncSession, principal: Principal, workflow_id: Any, field: str
) -> None:
    """Raise :class:`ReferenceNotGranted` when ``principal`` may not run the workflow a
    setting (``field``, e.g. ``error_workflow_id``) names; unknown ids are the caller's."""
    if (
        workflow_id
        and await may(session, principal, Permission.WORKFLOW_RUN, str(workflow_id)) is False
    ):
        raise ReferenceNotGranted(
            f"{field}: you may not run workflow {workflow_id}; ask for a run grant",
            "settings",
            field,
        )


async def _publisher(
    session: AsyncSession,
    run_id: str | uuid.UUID | None,
    version: tuple[str, int] | None = None,
) -> tuple[int, User | None] | None:
    """``(version number, publisher)`` of the run's version, or of ``version``
    (``(workflow id, number)``: trigger code, which runs before any run exists)."""
    query = select(WorkflowVersion.number, User).outerjoin(
        User, User.id == WorkflowVersion.created_by
    )
    try:
        if run_id:
            query = query.join(Run, WorkflowVersion.id == Run.version_id).where(
                Run.id == uuid.UUID(str(run_id))
            )
        elif version is not None:
            query = query.where(
                WorkflowVersion.workflow_id == uuid.UUID(version[0]),
                WorkflowVersion.number == version[1],
            )
        else:
            return None
    except ValueError:
        return None
    found = (await session.execute(query)).first()
    return (found[0], found[1]) if found else None


async def called_workflow_refusal(
    session: AsyncSession, run_id: uuid.UUID, workflow_id: str
) -> str | None:
    """Why the publisher of run ``run_id``'s version may not run workflow ``workflow_id``
    (a Sub-workflow or For-each call; ``None``: it may), in ``session``'s transaction:
    the run store's grant rule of called workflows (backend/runtime.py hands it to
    ``PgRunStore``)."""
    return await run_publisher_refusal(session, run_id, workflow_id, Permission.WORKFLOW_RUN)


async def run_publisher_refusal(
    session: AsyncSession,
    run_id: str | uuid.UUID | None,
    object_id: str,
    permission: Permission = Permission.CREDENTIAL_USE,
    *,
    version: tuple[str, int] | None = None,
) -> str | None:
    """Why the publisher of a run's version (or, for a trigger's code, which runs before
    its run exists, of ``version``: ``(workflow id, number)``) may not use the credential
    (or run the called workflow): a message for the step error, or None when it may. A
    version without an active publisher is refused; an unknown object is left to the
    caller's own check."""
    found = await _publisher(session, run_id, version)
    if found is None:
        return "the run is unknown, so its publisher cannot be checked"
    number, publisher = found
    if publisher is None or not publisher.is_active:
        return f"version {number} has no active publisher; re-publish it"
    principal = await access.principal_for(session, publisher)
    if await may(session, principal, permission, object_id) is not False:
        return None
    what = "use credential" if permission is Permission.CREDENTIAL_USE else "run workflow"
    return (
        f"{publisher.email}, who published version {number}, may not {what} {object_id} "
        "(no grant): grant it, or re-publish without it"
    )
