"""Helpers of the authorization tests: users of each role and their logged-in clients."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from backend.app import create_app
from backend.runtime import Runtime
from backend.services.identity import accounts, grants
from backend.settings import Settings
from tests.integration.conftest import login

PASSWORD = "a long enough test password"


async def make_user(runtime: Runtime, email: str, role: str) -> uuid.UUID:
    """Create a user with ``role``; returns its id."""
    async with runtime.sessionmaker() as session, session.begin():
        user = await accounts.create_user(session, email, PASSWORD, role=role)
        return user.id


@asynccontextmanager
async def client_as(
    settings: Settings, runtime: Runtime, email: str, role: str | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A client logged in as ``email`` (created with ``role`` first when given)."""
    if role is not None:
        await make_user(runtime, email, role)
    transport = httpx.ASGITransport(app=create_app(settings, runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
        await login(c, email, PASSWORD)
        yield c


async def grant(
    runtime: Runtime, object_type: str, object_id: str, subject: str, level: str
) -> uuid.UUID:
    """Give ``subject`` (``user:<id>``/``group:<id>``) ``level`` on an object."""
    async with runtime.sessionmaker() as session, session.begin():
        row = await grants.set_grant(session, object_type, uuid.UUID(object_id), subject, level)
        return row.id


async def revoke(runtime: Runtime, object_type: str, object_id: str, grant_id: uuid.UUID) -> None:
    """Delete a grant."""
    async with runtime.sessionmaker() as session, session.begin():
        assert await grants.delete_grant(session, grant_id, object_type, uuid.UUID(object_id))
