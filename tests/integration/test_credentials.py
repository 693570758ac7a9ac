"""Credentials on real PostgreSQL: API (secrets write-only), audit, engine resolution, rotation."""

from __future__ import annotations

import json
from typing import Any

import httpx
import msgspec
import pytest
from sqlalchemy import select, text

from backend import crypto
from backend.db.models.credentials import AuditLog, Credential
from backend.runtime import Runtime
from backend.services.connectors import credential_use
from backend.services.connectors import credentials as svc
from connectors import sdk
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.encrypted_settings import KEY, settings  # noqa: F401  (the fixture)
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration

SECRET = "tok-9f8e7d6c5b4a3210-very-secret"


async def test_secrets_are_write_only_and_audited(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    r = await client.post(
        "/api/credentials", json={"name": "API", "type": "bearer", "data": {"token": SECRET}}
    )
    assert r.status_code == 201, r.text
    cred = r.json()
    assert cred["public"] == {"token": "••••" + SECRET[-4:]}
    assert cred["secret_fields"] == ["token"]
    listed = await client.get("/api/credentials", params={"type": "bearer"})
    got = await client.get(f"/api/credentials/{cred['id']}")
    types = await client.get("/api/credentials/types")
    for response in (r, listed, got, types):
        assert SECRET not in response.text
    assert [c["id"] for c in listed.json()] == [cred["id"]]
    assert {"smtp", "bearer", "oauth2"} <= {t["name"] for t in types.json()}

    # Renaming with an empty secret keeps the secret.
    r = await client.patch(
        f"/api/credentials/{cred['id']}", json={"name": "API 2", "data": {"token": ""}}
    )
    assert r.status_code == 200 and r.json()["name"] == "API 2"
    async with runtime.sessionmaker() as session:
        row = (await session.execute(select(Credential))).scalar_one()
        assert SECRET.encode() not in row.ciphertext
        keyring = crypto.keyring_from_settings(runtime.settings)
        payload = json.loads(keyring.decrypt(row.ciphertext, aad=f"credential:{row.id}".encode()))
        assert payload["fields"] == {"token": SECRET}
        raw = (await session.execute(text("select public::text from credentials"))).scalar_one()
        assert SECRET not in raw

    bad = await client.post("/api/credentials", json={"name": "x", "type": "bearer", "data": {}})
    assert bad.status_code == 400 and "token" in bad.json()["detail"]
    unknown = await client.post("/api/credentials", json={"name": "x", "type": "nope", "data": {}})
    assert unknown.status_code == 400 and unknown.json()["field"] == "type"
    extra = await client.post(
        "/api/credentials", json={"name": "x", "type": "bearer", "data": {"token": "a", "b": 1}}
    )
    assert extra.status_code == 400 and extra.json()["field"] == "b"

    assert (await client.delete(f"/api/credentials/{cred['id']}")).status_code == 204
    assert (await client.get(f"/api/credentials/{cred['id']}")).status_code == 404
    async with runtime.sessionmaker() as session:
        rows = select(AuditLog.action).where(AuditLog.object_type == "credential")
        actions = (await session.execute(rows.order_by(AuditLog.id))).scalars()
        assert list(actions) == ["credential.create", "credential.update", "credential.delete"]
        details = (await session.execute(text("select details::text from audit_log"))).scalars()
        assert all(SECRET not in d for d in details)


async def test_engine_resolves_the_credential_and_audits_its_use(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    cred = (
        await client.post(
            "/api/credentials", json={"name": "API", "type": "bearer", "data": {"token": SECRET}}
        )
    ).json()
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node(
                "call",
                "http.request",
                method="POST",
                url=sink.url + "/x",
                credential=cred["id"],
                body={"n": 1},
            ),
        ],
        [edge("hook", "call")],
    )
    wf = await publish(client, d)
    r = await client.post(wf["webhook_path"], json={"a": 1})
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    assert sink.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    detail = await run_detail(client, run_id)
    assert SECRET not in json.dumps(detail)
    assert steps_by_id(detail)["call"]["status"] == "succeeded"
    async with runtime.sessionmaker() as session:
        use = (
            await session.execute(select(AuditLog).where(AuditLog.action == "credential.use"))
        ).scalar_one()
        assert use.object_id == cred["id"]
        assert use.details["run_id"] == run_id and use.details["step_id"] == "call"


async def test_missing_credential_fails_the_step_clearly(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node(
                "call",
                "http.request",
                url=sink.url,
                credential="00000000-0000-0000-0000-0000000000aa",
            ),
        ],
        [edge("hook", "call")],
    )
    wf = await publish(client, d)
    run_id = (await client.post(wf["webhook_path"], json={})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"
    step = steps_by_id(await run_detail(client, run_id))["call"]
    assert step["error"]["kind"] == "credential_missing"
    assert sink.requests == []


async def test_rotate_keys_reencrypts_everything(runtime: Runtime) -> None:
    old = crypto.keyring_from_settings(runtime.settings)
    async with runtime.sessionmaker() as session, session.begin():
        for i in range(3):
            await svc.create_credential(
                session,
                runtime.catalog,
                old,
                name=f"c{i}",
                type_name="basic",
                data={"username": f"u{i}", "password": f"p{i}-secret"},
                user_id=None,
            )
    new = crypto.Keyring.from_base64(crypto.generate_key(), [KEY])
    async with runtime.sessionmaker() as session, session.begin():
        assert await svc.rotate_keys(session, new) == 3
    async with runtime.sessionmaker() as session, session.begin():
        assert await svc.rotate_keys(session, new) == 0
        rows = (await session.execute(select(Credential))).scalars().all()
        assert {r.key_id for r in rows} == {new.current_id}
    only_new = crypto.Keyring(new.current)
    resolved = await credential_use.resolve_for_action(
        runtime.sessionmaker,
        runtime.catalog,
        only_new,
        str(rows[0].id),
        ("basic",),
        info=sdk.ActionInfo("r", "w", "s", 1, "r:s", "test.action"),
        publisher_check=False,
    )
    assert resolved["password"].endswith("-secret") and resolved["kind"] == "basic"
    with pytest.raises(crypto.CryptoError):
        old.decrypt(rows[0].ciphertext, aad=f"credential:{rows[0].id}".encode())
    # A keyring without the key of the data refuses to rotate and changes nothing.
    async with runtime.sessionmaker() as session:
        with pytest.raises(crypto.CryptoError):
            await svc.rotate_keys(session, crypto.Keyring.from_base64(crypto.generate_key()))


def test_keyring_rejects_tampering_and_wrong_aad() -> None:
    ring = crypto.Keyring.from_base64(KEY)
    blob = ring.encrypt(b"hello", aad=b"a")
    assert ring.decrypt(blob, aad=b"a") == b"hello"
    with pytest.raises(crypto.CryptoError):
        ring.decrypt(blob, aad=b"b")
    with pytest.raises(crypto.CryptoError):
        ring.decrypt(blob[:-1] + bytes([blob[-1] ^ 1]), aad=b"a")
    assert crypto.key_id_of(blob) == ring.current_id
    assert msgspec.json.decode(msgspec.json.encode({"k": 1})) == {"k": 1}


async def test_credentials_page_creates_lists_masked_and_deletes(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    page = await client.get("/credentials", params={"type": "smtp"})
    assert page.status_code == 200 and 'data-type="smtp"' in page.text
    assert 'type="password" name="field.password"' in page.text
    form = {
        "_csrf_token": client.headers["x-csrftoken"],
        "type": "smtp",
        "name": "Mail",
        "field.host": "127.0.0.1",
        "field.port": "2525",
        "field.security": "none",
        "field.username": "mailer",
        "field.password": SECRET,
    }
    r = await client.post("/credentials", data=form)
    assert r.status_code in (302, 303), r.text
    listing = await client.get("/credentials")
    assert "Mail" in listing.text and "127.0.0.1" in listing.text
    assert SECRET not in listing.text and "••••" + SECRET[-4:] in listing.text
    bad = await client.post("/credentials", data={**form, "field.port": "many"})
    assert bad.status_code == 400 and "whole number" in bad.text and SECRET not in bad.text
    [cred] = (await client.get("/api/credentials")).json()
    assert cred["public"]["port"] == 2525 and cred["public"]["verify_tls"] is False
    r = await client.post(
        f"/credentials/{cred['id']}/delete", data={"_csrf_token": client.headers["x-csrftoken"]}
    )
    assert r.status_code in (302, 303)
    assert (await client.get("/api/credentials")).json() == []


async def test_config_panel_picks_credentials_and_new_ones_return_to_the_designer(
    client: httpx.AsyncClient,
) -> None:
    designer = "/workflows/00000000-0000-0000-0000-000000000001/designer"
    created = await client.post(
        "/api/credentials",
        json={
            "name": "Relay",
            "type": "smtp",
            "data": {"host": "127.0.0.1", "username": "mailer", "password": SECRET},
        },
    )
    assert created.status_code == 201, created.text
    cred_id = created.json()["id"]
    await client.post(
        "/api/credentials",
        json={"name": "Bot", "type": "slack.bot_token", "data": {"token": SECRET}},
    )
    panel = await client.post(
        "/designer/config-panel",
        json={
            "node_type": "email.send",
            "node_id": "send_1",
            "config": {"credential": cred_id},
            "return_to": designer,
        },
    )
    assert panel.status_code == 201, panel.text
    html = panel.text
    assert 'data-kind="credential"' in html
    assert f'<option value="{cred_id}" selected>Relay · password ••••{SECRET[-4:]}</option>' in html
    assert "Bot" not in html  # a Slack credential is not offered for SMTP
    assert SECRET not in html
    next_path = f"{designer}?node=send_1&field=credential"
    assert 'href="/credentials?type=smtp&amp;next=' in html

    # The credentials page keeps `next` and goes back there with the new id.
    page = await client.get("/credentials", params={"type": "smtp", "next": next_path})
    assert f'name="next" value="{next_path.replace("&", "&amp;")}"' in page.text
    form = {
        "_csrf_token": client.headers["x-csrftoken"],
        "type": "smtp",
        "name": "Second relay",
        "field.host": "127.0.0.1",
        "field.password": SECRET,
        "next": next_path,
    }
    r = await client.post("/credentials", data=form)
    assert r.status_code in (302, 303), r.text
    location = r.headers["location"]
    assert location.startswith(f"{next_path}&credential=")
    new_id = location.rsplit("=", 1)[1]
    assert new_id in {c["id"] for c in (await client.get("/api/credentials")).json()}
    # Never back to another site.
    r = await client.post("/credentials", data={**form, "name": "Third", "next": "//evil.test/"})
    assert r.headers["location"].startswith("/credentials#credential-")
