"""Credentials are used only where granted: a workflow may reference a credential only if
the user saving it (new references), publishing it (every reference) and, at run time, the
publisher of the running version may use it (:data:`~backend.auth.policy.Permission`
``credential:use``). A grant revoked after publishing stops the next attempt of a step with
the credential with the non-retryable error kind ``credential_not_granted``.

References are the node config fields whose schema carries ``x-credential-type``
(:func:`connectors.sdk.credential_types_of_schema`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.auth.policy import Decision, Permission, Principal, decide
from backend.db.models import Run, User, WorkflowVersion
from backend.services import access
from connectors.sdk.credentials import credential_types_of_schema


class CredentialNotGranted(PermissionError):
    """A diagram references a credential its author may not use (403): ``node_id`` and
    ``field`` say where."""

    def __init__(self, message: str, node_id: str, field: str) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.field = field


def references(diagram: Any, catalog: Any) -> Iterator[tuple[str, str, str]]:
    """``(node id, config field, credential id)`` of every credential a diagram names
    (``diagram`` is the draft/version dict or a :class:`designer_schema` Diagram)."""
    nodes = diagram.get("nodes", []) if isinstance(diagram, dict) else diagram.nodes
    for node in nodes or ():
        get = node.get if isinstance(node, dict) else lambda k, n=node: getattr(n, k, None)
        spec = catalog.get(get("type"))
        config = get("config") or {}
        if spec is None or not isinstance(config, dict):
            continue
        for field in credential_types_of_schema(spec.config_schema):
            value = config.get(field)
            if isinstance(value, str) and value:
                yield str(get("id")), field, value


async def may_use(session: AsyncSession, principal: Principal, credential_id: str) -> bool:
    """Whether ``principal`` may use the credential (an unknown id counts as not usable:
    the engine reports it as ``credential_missing`` itself)."""
    obj = await access.credential_access(session, credential_id)
    return obj is not None and decide(principal, Permission.CREDENTIAL_USE, obj) is Decision.ALLOW


async def check_diagram(
    session: AsyncSession,
    principal: Principal,
    diagram: Any,
    catalog: Any,
    *,
    previous: Any = None,
) -> None:
    """Raise :class:`CredentialNotGranted` for the first credential reference of
    ``diagram`` the principal may not use; references already in ``previous`` (the stored
    draft) are not checked again (saving keeps what others put there; publishing checks
    all). Unknown credential ids are left to the compiler and the engine."""
    known = {(n, f, c) for n, f, c in references(previous, catalog)} if previous else set()
    for ref in references(diagram, catalog):
        if ref in known:
            continue
        node_id, field, credential_id = ref
        obj = await access.credential_access(session, credential_id)
        if obj is None:
            continue
        if decide(principal, Permission.CREDENTIAL_USE, obj) is not Decision.ALLOW:
            raise CredentialNotGranted(
                f"node {node_id!r} field {field!r}: you may not use credential "
                f"{credential_id}; ask its owner or an admin for a use grant",
                node_id,
                field,
            )


async def run_publisher_refusal(
    session: AsyncSession, run_id: str | uuid.UUID | None, credential_id: str
) -> str | None:
    """Why the publisher of a run's version may not use the credential (a message for the
    step error), or None when it may. A version without a known publisher is refused."""
    try:
        key = uuid.UUID(str(run_id))
    except ValueError:
        return "the run is unknown, so its publisher cannot be checked"
    found = (
        await session.execute(
            select(WorkflowVersion.number, User)
            .select_from(Run)
            .join(WorkflowVersion, WorkflowVersion.id == Run.version_id)
            .outerjoin(User, User.id == WorkflowVersion.created_by)
            .where(Run.id == key)
        )
    ).first()
    if found is None:
        return "the run is unknown, so its publisher cannot be checked"
    number, publisher = found
    if publisher is None or not publisher.is_active:
        return f"version {number} has no active publisher; re-publish it to use credentials"
    principal = await access.principal_for(session, publisher)
    if await may_use(session, principal, credential_id):
        return None
    return (
        f"{publisher.email}, who published version {number}, may not use credential "
        f"{credential_id} (no use grant): grant it or re-publish with another credential"
    )
