"""The audit log records who, from where and in which request a change was made."""

from __future__ import annotations

import httpx
import msgspec
import pytest
from sqlalchemy import select

from backend import crypto
from backend.db.models.credentials import AuditLog
from backend.runtime import Runtime
from backend.settings import Settings
from tests.integration.conftest import ADMIN_EMAIL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def settings(settings: Settings) -> Settings:
    """The integration settings plus an encryption key (credentials need one)."""
    return msgspec.structs.replace(settings, encryption_key=crypto.generate_key())


async def test_change_is_audited_with_actor_address_and_request_id(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    r = await client.post(
        "/api/credentials",
        json={"name": "ops token", "type": "bearer", "data": {"token": "s3cr3t-value"}},
        headers={"x-request-id": "req-42.a"},
    )
    assert r.status_code == 201, r.text
    assert r.headers["x-request-id"] == "req-42.a"
    async with runtime.sessionmaker() as session:
        row = (
            await session.execute(select(AuditLog).where(AuditLog.action == "credential.create"))
        ).scalar_one()
    assert row.request_id == "req-42.a"
    assert row.actor_label == ADMIN_EMAIL
    assert row.actor_user_id is not None
    assert row.address == "127.0.0.1"
    assert "s3cr3t-value" not in str(row.details)


async def test_malformed_request_id_is_replaced(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/workflows", headers={"x-request-id": "bad id\twith spaces"})
    assert r.status_code == 200
    assert len(r.headers["x-request-id"]) == 32
    assert r.headers["x-request-id"] != "bad id\twith spaces"
