"""The list envelope of each collection (:mod:`backend.api.lists`): a
:class:`~backend.api.lists.ListPage` with ``data``, one named type per collection so the
OpenAPI document has a component for each (``RunList``, ``WorkflowList``, ...), and the
pages of lists more than one controller answers (grants, sessions, tokens). Lists of items
defined beside their controller (groups, service accounts, ...) have their envelope there."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from litestar import Request

from backend.api.grant_schemas import GrantOut, SubjectOut, grant_out
from backend.api.lists import ListPage, listed
from backend.api.schemas import SessionOut, VersionOut, WorkflowSummary
from backend.api.token_schemas import TokenOut
from backend.api.user_schemas import AdminUserOut
from backend.services.connectors.credentials import CredentialView
from backend.services.connectors.openapi_connectors import ConnectorOut
from backend.services.identity import grants
from backend.services.operations.audit_log import AuditEntry
from backend.services.operations.settings_view import SettingView
from backend.services.runs.run_children import ChildLink
from backend.services.runs.runs import RunSummary
from backend.web.authentication import DbSession


class RunList(ListPage):
    """A page of runs, newest first."""

    data: list[RunSummary]


class ChildList(ListPage):
    """A page of a run's child runs in (step, item index) order; ``total``: how many
    children the run (or the step asked for) has."""

    data: list[ChildLink]
    total: int


class WorkflowList(ListPage):
    """A page of workflows (without their drafts), newest first."""

    data: list[WorkflowSummary]


class VersionList(ListPage):
    """A page of a workflow's published versions, newest first."""

    data: list[VersionOut]


class CredentialList(ListPage):
    """A page of credentials (masked), by name."""

    data: list[CredentialView]


class TokenList(ListPage):
    """A page of API tokens (never their text), newest first."""

    data: list[TokenOut]


class UserList(ListPage):
    """A page of accounts, by email."""

    data: list[AdminUserOut]


class SessionList(ListPage):
    """A page of login sessions, newest first."""

    data: list[SessionOut]


class AuditList(ListPage):
    """A page of audit log entries, newest first."""

    data: list[AuditEntry]


class SettingList(ListPage):
    """A page of the installation's settings, by name."""

    data: list[SettingView]


class ConnectorList(ListPage):
    """A page of imported (OpenAPI-made) connectors, by name."""

    data: list[ConnectorOut]


class GrantList(ListPage):
    """A page of grants, by whom they name."""

    data: list[GrantOut]


class SubjectList(ListPage):
    """A page of the users and groups a grant can name, by label."""

    data: list[SubjectOut]


async def grant_list(
    request: Request[Any, Any, Any],
    db: DbSession,
    object_type: str,
    object_id: uuid.UUID,
    *,
    cursor: str | None,
    limit: int,
) -> GrantList:
    """A page of the grants on one object (workflow, credential, project), by subject."""
    found = [grant_out(g) for g in await grants.list_grants(db, object_type, object_id)]
    key: Callable[[GrantOut], tuple[str, str]] = lambda g: (g.subject_label, g.id)  # noqa: E731
    return listed(request, GrantList, found, key, tuple[str, str], cursor=cursor, limit=limit)


Created = TypeVar("Created", SessionOut, TokenOut)
Envelope = TypeVar("Envelope", SessionList, TokenList)


def newest_first(
    request: Request[Any, Any, Any],
    envelope: type[Envelope],
    found: list[Created],
    *,
    cursor: str | None,
    limit: int,
) -> Envelope:
    """A page of login sessions or API tokens, newest first (by creation, then id)."""
    key: Callable[[Created], tuple[datetime, str]] = lambda i: (i.created_at, i.id)  # noqa: E731
    return listed(
        request,
        envelope,
        found,
        key,
        tuple[datetime, str],
        cursor=cursor,
        limit=limit,
        descending=True,
    )
