"""Webhooks end to end: body kinds, authentication kinds, response modes, idempotency,
limits, test calls and the shared webhook cases (real PostgreSQL, Redis and arq worker)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text

from backend import cli, crypto
from backend.db.models import Credential, WebhookSecret
from backend.runtime import Runtime
from backend.services.connectors import credentials as creds
from backend.services.triggers import webhooks as hooks
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import TEST_ENCRYPTION_KEY, wait_for_run
from tests.integration.flows import publish, run_detail

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent.parent / "fixtures"
SECRET = "It's a Secret to Everybody"


def hook(**config: Any) -> dict[str, Any]:
    return diagram([node("hook", "trigger.webhook", **config)], [])


async def publish_hook(
    client: httpx.AsyncClient, secret: str | None = None, **config: Any
) -> dict[str, Any]:
    wf = await publish(client, hook(**config))
    if secret is not None:
        r = await client.put(f"/api/workflows/{wf['id']}/webhook/secret", json={"secret": secret})
        assert r.status_code == 204, r.text
    return wf


async def count(runtime: Runtime, sql: str) -> int:
    async with runtime.engine.connect() as conn:
        return int((await conn.execute(text(sql))).scalar_one())


async def run_input(client: httpx.AsyncClient, runtime: Runtime, r: httpx.Response) -> Any:
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    return (await run_detail(client, run_id))["input"]


# -- bodies ------------------------------------------------------------------------------


async def test_webhook_empty_json_body(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    """Shared case webhook-empty-json-body: "" and "   " -> {}; "{bad" -> 400, no run."""
    wf = await publish_hook(client)
    for body in (b"", b"   "):
        r = await client.post(
            wf["webhook_path"], content=body, headers={"content-type": "application/json"}
        )
        assert (await run_input(client, runtime, r))["body"] == {}
    r = await client.post(
        wf["webhook_path"], content=b"{bad", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    detail = r.json()["detail"]
    assert "malformed JSON" in detail and "line 1, column 2" in detail
    assert await count(runtime, "select count(*) from runs") == 2


async def test_body_kinds_form_text_xml_binary_charset(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish_hook(client)
    path = wf["webhook_path"]
    r = await client.post(
        path,
        content=b"a=1&a=2&name=caf%E9",
        headers={"content-type": "application/x-www-form-urlencoded; charset=latin-1"},
    )
    assert (await run_input(client, runtime, r))["body"] == {"a": ["1", "2"], "name": "café"}
    r = await client.post(
        path,
        content="naïve".encode("latin-1"),
        headers={"content-type": "text/plain; charset=latin-1"},
    )
    assert (await run_input(client, runtime, r))["body"] == "naïve"
    xml = b"<?xml version='1.0'?><order id='7'/>"
    r = await client.post(path, content=xml, headers={"content-type": "application/xml"})
    assert (await run_input(client, runtime, r))["body"] == xml.decode()
    r = await client.post(
        path, content=b"\x00\xff\xfe", headers={"content-type": "application/octet-stream"}
    )
    body = (await run_input(client, runtime, r))["body"]
    assert body == {"$base64": "AP/+", "content_type": "application/octet-stream", "size": 3}
    r = await client.post(path, content=b"ok \xff\xfe", headers={"content-type": "text/plain"})
    assert (await run_input(client, runtime, r))["body"] == "ok \ufffd\ufffd"
    r = await client.post(
        path, content=b'{"k": "\xff"}', headers={"content-type": "application/json"}
    )
    assert (await run_input(client, runtime, r))["body"] == {"k": "\ufffd"}


async def test_multipart_files_are_stored_by_reference(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    wf = await publish_hook(client)
    content = bytes(range(256)) * 40
    r = await client.post(
        wf["webhook_path"],
        data={"title": "report", "tag": ["a", "b"]},
        files={"upload": ("data.bin", content, "application/octet-stream")},
    )
    got = await run_input(client, runtime, r)
    assert got["body"] == {"title": "report", "tag": ["a", "b"]}
    (f,) = got["files"]
    assert f["filename"] == "data.bin" and f["field"] == "upload"
    assert f["size"] == len(content) and f["sha256"] == hashlib.sha256(content).hexdigest()
    assert f["ref"].startswith("file:")
    async with runtime.engine.connect() as conn:
        size = (await conn.execute(text("select pg_column_size(input) from runs"))).scalar_one()
    assert size < 2000  # the run row holds the reference, not the 10 KiB
    download = await client.get(f"/api/files/{f['ref'].removeprefix('file:')}")
    assert download.status_code == 200 and download.content == content


async def test_methods_suffix_disabled_and_body_limit(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish_hook(client, methods="PUT, POST", path_suffix="orders/new", max_body=10)
    path = wf["webhook_path"]
    assert (await client.post(path, json={})).status_code == 404  # suffix missing
    r = await client.get(path + "/orders/new")
    assert r.status_code == 405 and r.headers["allow"] == "PUT, POST"
    r = await client.put(path + "/orders/new", content=b"x" * 11)
    assert r.status_code == 413
    r = await client.put(path + "/orders/new", json={"a": 1})
    assert r.status_code == 202
    off = await publish_hook(client, enabled=False)
    assert (await client.post(off["webhook_path"], json={})).status_code == 404
    assert await count(runtime, "select count(*) from runs") == 1
    reasons = await count(
        runtime, "select count(*) from webhook_deliveries where status_code in (405, 413)"
    )
    assert reasons == 2


# -- authentication ----------------------------------------------------------------------


def _hex(key: str, content: bytes, algo: Any = hashlib.sha256) -> str:
    return hmac.new(key.encode(), content, algo).hexdigest()


async def _reject_then_accept(
    client: httpx.AsyncClient,
    runtime: Runtime,
    wf: dict[str, Any],
    body: bytes,
    bad: dict[str, str],
    good: dict[str, str],
) -> None:
    before = await count(runtime, "select count(*) from runs")
    r = await client.post(wf["webhook_path"], content=body, headers=bad)
    assert r.status_code == 401, r.text
    assert await count(runtime, "select count(*) from runs") == before
    r = await client.post(wf["webhook_path"], content=body, headers=good)
    assert r.status_code == 202, r.text


async def test_github_hmac_with_real_payload(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    body = (FIXTURES / "github-push-tag-deleted.json").read_bytes()
    wf = await publish_hook(
        client, SECRET, auth="hmac", hmac_preset="github", delivery_id_header="X-GitHub-Delivery"
    )
    delivery = str(uuid.uuid4())
    base = {"content-type": "application/json", "x-github-event": "push"}
    good = {**base, "x-github-delivery": delivery}
    good["x-hub-signature-256"] = "sha256=" + _hex(SECRET, body)
    bad = {**good, "x-hub-signature-256": "sha256=" + _hex("wrong", body)}
    await _reject_then_accept(client, runtime, wf, body, bad, good)
    r = await client.post(wf["webhook_path"], content=body, headers={**base})
    assert r.status_code == 401 and "missing X-Hub-Signature-256" in r.json()["detail"]
    # A redelivery (same X-GitHub-Delivery) returns the original run.
    first = await client.post(wf["webhook_path"], content=body, headers=good)
    again = await client.post(wf["webhook_path"], content=body, headers=good)
    assert first.json()["run_id"] == again.json()["run_id"]
    got = await run_input(client, runtime, first)
    assert got["body"]["ref"] == "refs/tags/simple-tag" and got["body"]["deleted"] is True
    assert await count(runtime, "select count(*) from runs") == 1
    rejected = await count(
        runtime,
        "select count(*) from webhook_deliveries d join events e"
        " on e.kind = 'webhook.rejected' where d.status_code = 401",
    )
    assert rejected == 4  # 2 rejections x 2 audit events (deliveries row joined to each event)
    deliveries = (await client.get(f"/api/workflows/{wf['id']}/webhook/deliveries")).json()
    assert {d["outcome"] for d in deliveries} == {"accepted", "rejected"}
    info = (await client.get(f"/api/workflows/{wf['id']}/webhook")).json()
    assert info["secret_set"] is True and SECRET not in json.dumps(info)


async def test_slack_signature_with_timestamp_tolerance(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish_hook(client, SECRET, auth="hmac", hmac_preset="slack")
    body = b"token=x&command=%2Fdeploy"
    ts = str(int(time.time()))
    sig = "v0=" + _hex(SECRET, b"v0:" + ts.encode() + b":" + body)
    good = {"x-slack-request-timestamp": ts, "x-slack-signature": sig}
    old = str(int(time.time()) - 600)
    stale = {
        "x-slack-request-timestamp": old,
        "x-slack-signature": "v0=" + _hex(SECRET, b"v0:" + old.encode() + b":" + body),
    }
    await _reject_then_accept(client, runtime, wf, body, stale, good)
    r = await client.post(wf["webhook_path"], content=body, headers=stale)
    assert "tolerance" in r.json()["detail"]


async def test_stripe_signature(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await publish_hook(client, "whsec_test", auth="hmac", hmac_preset="stripe")
    body = b'{"id": "evt_1", "type": "charge.succeeded"}'
    ts = str(int(time.time()))
    sig = hmac.new(b"whsec_test", ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    good = {"stripe-signature": f"t={ts},v1=deadbeef,v1={sig},v0=zz"}
    bad = {"stripe-signature": f"t={ts},v1=deadbeef"}
    await _reject_then_accept(client, runtime, wf, body, bad, good)


async def test_shopify_signature(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await publish_hook(client, "shpss", auth="hmac", hmac_preset="shopify")
    body = b'{"id": 820982911946154508}'
    digest = hmac.new(b"shpss", body, hashlib.sha256).digest()
    good = {"x-shopify-hmac-sha256": base64.b64encode(digest).decode()}
    bad = {"x-shopify-hmac-sha256": base64.b64encode(b"x" * 32).decode()}
    await _reject_then_accept(client, runtime, wf, body, bad, good)


async def test_generic_signature_timestamp_base64_prefix(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    wf = await publish_hook(
        client,
        "k3y",
        auth="hmac",
        hmac_preset="generic",
        hmac_header="X-Sig",
        hmac_algorithm="sha512",
        hmac_encoding="base64",
        hmac_prefix="v1,",
        hmac_signed="timestamp_body",
        hmac_timestamp_header="X-Ts",
    )
    body = b"payload"
    ts = str(int(time.time()))
    digest = hmac.new(b"k3y", ts.encode() + b"." + body, hashlib.sha512).digest()
    good = {"x-ts": ts, "x-sig": "v1," + base64.b64encode(digest).decode()}
    bad = {"x-ts": str(int(ts) + 1), "x-sig": good["x-sig"]}
    await _reject_then_accept(client, runtime, wf, body, bad, good)


async def test_header_token_and_basic_auth(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await publish_hook(client, "t0ken", auth="header", auth_header="X-Api-Key")
    await _reject_then_accept(
        client, runtime, wf, b"{}", {"x-api-key": "nope"}, {"x-api-key": "t0ken"}
    )
    wf = await publish_hook(client, "pa55", auth="basic", basic_user="acme")
    good = {"authorization": "Basic " + base64.b64encode(b"acme:pa55").decode()}
    bad = {"authorization": "Basic " + base64.b64encode(b"acme:wrong").decode()}
    await _reject_then_accept(client, runtime, wf, b"{}", bad, good)
    # An authenticated webhook without a secret refuses everything.
    wf = await publish_hook(client, None, auth="header")
    r = await client.post(wf["webhook_path"], json={})
    assert r.status_code == 401 and "no secret" in r.json()["detail"]


async def test_rotate_key_reencrypts_webhook_secrets_with_credentials(
    client: httpx.AsyncClient,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``railyard rotate-key`` re-encrypts webhook secrets and credentials in one
    transaction; a blob under a key it does not have changes nothing."""
    wf = await publish_hook(client, "t0ken", auth="header", auth_header="X-Api-Key")
    workflow_id = uuid.UUID(wf["id"])
    old = crypto.keyring_from_settings(runtime.settings)
    async with runtime.sessionmaker() as session, session.begin():
        await creds.create_credential(
            session,
            runtime.catalog,
            old,
            name="login",
            type_name="basic",
            data={"username": "u", "password": "p-secret"},
            user_id=None,
        )
    subscribed = await client.post(
        f"/api/v1/workflows/{wf['id']}/subscriptions",
        json={"url": "http://127.0.0.1:9/events", "events": ["run.failed"]},
    )
    assert subscribed.status_code == 201, subscribed.text

    async def blobs() -> tuple[bytes, bytes]:
        async with runtime.sessionmaker() as session:
            secret = await session.get(WebhookSecret, workflow_id)
            cred = (await session.execute(select(Credential))).scalar_one()
            assert secret is not None
            return secret.ciphertext, cred.ciphertext

    new_key = crypto.generate_key()
    new = crypto.Keyring.from_base64(new_key)
    monkeypatch.delenv("RAILYARD_SETTINGS_FILE", raising=False)
    monkeypatch.setenv("DATABASE_URL", runtime.settings.database_url)
    monkeypatch.setenv("REDIS_URL", runtime.settings.redis_url)
    monkeypatch.setenv("RAILYARD_ENCRYPTION_KEY", new_key)
    monkeypatch.delenv("RAILYARD_ENCRYPTION_OLD_KEYS", raising=False)
    before = await blobs()
    # without the old key nothing is re-encrypted, credentials included
    assert await asyncio.to_thread(cli.main, ["rotate-key"]) == 1
    assert "nothing changed" in capsys.readouterr().err
    assert await blobs() == before
    monkeypatch.setenv("RAILYARD_ENCRYPTION_OLD_KEYS", TEST_ENCRYPTION_KEY)
    assert await asyncio.to_thread(cli.main, ["rotate-key"]) == 0
    out = capsys.readouterr().out
    assert "1 credential(s), 1 webhook secret(s) and 1 event subscription secret(s)" in out
    secret_blob, cred_blob = await blobs()
    assert crypto.key_id_of(secret_blob) == crypto.key_id_of(cred_blob) == new.current_id
    assert new.decrypt(secret_blob, aad=hooks.secret_aad(workflow_id)) == b"t0ken"
    with pytest.raises(crypto.CryptoError):
        old.decrypt(secret_blob, aad=hooks.secret_aad(workflow_id))
    assert await asyncio.to_thread(cli.main, ["rotate-key"]) == 0
    out = capsys.readouterr().out
    assert "0 credential(s), 0 webhook secret(s) and 0 event subscription secret(s)" in out
    # a process running on the new key alone still authenticates the webhook
    crypto.configure(new)
    hooks.clear_endpoint_cache()
    try:
        r = await client.post(wf["webhook_path"], json={}, headers={"x-api-key": "t0ken"})
        assert r.status_code == 202, r.text
    finally:
        crypto.configure(old)
        hooks.clear_endpoint_cache()


# -- response modes, idempotency, rate limit ---------------------------------------------


def _set_pipeline(respond: str, *, with_respond_node: bool = False) -> dict[str, Any]:
    nodes = [
        node("hook", "trigger.webhook", respond=respond, wait_timeout=10),
        node("set_1", "control.set", mapping={"id": "=body.id", "twice": "=body.id * 2"}),
    ]
    edges = [edge("hook", "set_1")]
    if with_respond_node:
        nodes.append(node("reply", "control.respond", status=201, body='={"got": id}'))
        edges.append(edge("set_1", "reply"))
    return diagram(nodes, edges)


async def test_response_modes(client: httpx.AsyncClient, runtime: Runtime, worker: Any) -> None:
    wf = await publish(client, _set_pipeline("immediately"))
    r = await client.post(wf["webhook_path"], json={"id": 1})
    assert r.status_code == 202 and r.json()["status_url"].endswith(r.json()["run_id"])
    wf = await publish(client, _set_pipeline("respond_node", with_respond_node=True))
    r = await client.post(wf["webhook_path"], json={"id": 2})
    assert r.status_code == 201 and r.json() == {"got": 2}
    wf = await publish(client, _set_pipeline("last_step"))
    r = await client.post(wf["webhook_path"], json={"id": 3})
    assert r.status_code == 200 and r.json() == {"id": 3, "twice": 6}


async def test_idempotency_key_window(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await publish_hook(client, idempotency_hours=1)
    headers = {"idempotency-key": "order-17"}
    first = (await client.post(wf["webhook_path"], json={}, headers=headers)).json()
    second = (await client.post(wf["webhook_path"], json={}, headers=headers)).json()
    assert first["run_id"] == second["run_id"]
    async with runtime.engine.begin() as conn:  # the first run is now 2 hours old
        await conn.execute(text("update runs set created_at = now() - interval '2 hours'"))
    third = (await client.post(wf["webhook_path"], json={}, headers=headers)).json()
    assert third["run_id"] != first["run_id"]
    assert await count(runtime, "select count(*) from runs") == 2


async def test_rate_limit_429_with_retry_after(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = await publish_hook(client, rate_limit=3)
    codes = [(await client.post(wf["webhook_path"], json={})).status_code for _ in range(5)]
    assert codes[:3] == [202, 202, 202]
    r = await client.post(wf["webhook_path"], json={})
    assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
    assert await count(runtime, "select count(*) from runs") == 3


async def test_webhook_burst(
    client: httpx.AsyncClient, runtime: Runtime, worker_factory: Any
) -> None:
    """Shared case webhook-burst: 50 concurrent calls with the worker stopped, 50 runs."""
    wf = await publish(client, _set_pipeline("immediately"))
    rs = await asyncio.gather(*(client.post(wf["webhook_path"], json={"id": i}) for i in range(50)))
    assert all(r.status_code == 202 for r in rs)
    ids = [r.json()["run_id"] for r in rs]
    assert len(set(ids)) == 50
    assert await count(runtime, "select count(*) from runs") == 50  # stored before the answer
    dup = await asyncio.gather(
        *(
            client.post(wf["webhook_path"], json={"id": 99}, headers={"idempotency-key": "same"})
            for _ in range(2)
        )
    )
    assert dup[0].json()["run_id"] == dup[1].json()["run_id"]
    async with worker_factory():
        for run_id in ids:
            assert await wait_for_run(runtime, run_id) == "succeeded"
    async with runtime.engine.connect() as conn:
        outputs = (
            (await conn.execute(text("select output from runs where output is not null")))
            .scalars()
            .all()
        )
    assert sorted(o["id"] for o in outputs) == [*range(50), 99]
    assert await count(runtime, "select count(*) from runs") == 51


# -- test calls and API tokens -----------------------------------------------------------


async def test_listen_for_a_test_call(client: httpx.AsyncClient, runtime: Runtime) -> None:
    wf = (await client.post("/api/workflows", json={"name": "Draft only"})).json()
    r = await client.put(
        f"/api/workflows/{wf['id']}/draft", json={"diagram": hook(path_suffix="gh")}
    )
    info = (await client.get(f"/api/workflows/{wf['id']}/webhook")).json()
    test_path = "/hooks/test/" + info["test_url"].split("/hooks/test/", 1)[1]
    assert test_path.endswith("/gh")
    r = await client.post(test_path, json={"a": 1})
    assert r.status_code == 404 and "not listening" in r.json()["detail"]
    assert (await client.post(f"/api/workflows/{wf['id']}/webhook/listen")).json()["listening"]
    r = await client.post(test_path + "?x=1", json={"order": {"id": 5}})
    assert r.status_code == 200
    call = (await client.get(f"/api/workflows/{wf['id']}/webhook/test-call")).json()
    assert call["input"]["body"] == {"order": {"id": 5}} and call["input"]["query"] == {"x": "1"}
    assert (await client.post(test_path, json={})).status_code == 404  # listening ended
    assert await count(runtime, "select count(*) from runs") == 0


async def test_api_token_starts_a_run_without_session_or_csrf(
    client: httpx.AsyncClient, runtime: Runtime, settings: Any
) -> None:
    wf = await publish(client, diagram([node("m", "trigger.manual")], []))
    created = await client.post("/api/tokens", json={"name": "ci"})
    assert created.status_code == 201
    token = created.json()["token"]
    assert token.startswith("ry_")
    async with runtime.engine.connect() as conn:
        stored = (await conn.execute(text("select sha256 from api_tokens"))).scalar_one()
    assert stored == hashlib.sha256(token.encode()).hexdigest()
    transport = client._transport  # the same app, without cookies or CSRF header
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as api:
        r = await api.post(
            f"/api/workflows/{wf['id']}/runs",
            json={"input": {"n": 1}},
            headers={"authorization": f"Bearer {token}"},
        )
        assert r.status_code == 201, r.text
        assert r.json()["run_id"]
        bad = await api.post(
            f"/api/workflows/{wf['id']}/runs",
            json={"input": {}},
            headers={"authorization": "Bearer ry_wrong"},
        )
        assert bad.status_code == 401
        no_csrf = await api.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})
        assert no_csrf.status_code == 403  # cookie-less, token-less unsafe request: CSRF
    async with runtime.engine.connect() as conn:
        trigger = (await conn.execute(text("select trigger from runs"))).scalar_one()
    assert trigger == "api"
    tokens = (await client.get("/api/tokens")).json()
    assert tokens[0]["last_used_at"] is not None and tokens[0]["token"] is None


async def test_token_and_deliveries_pages(client: httpx.AsyncClient, runtime: Runtime) -> None:
    page = await client.get("/tokens")
    assert page.status_code == 200 and "API tokens" in page.text
    csrf = client.headers["x-csrftoken"]
    created = await client.post("/tokens", data={"name": "deploy", "_csrf_token": csrf})
    assert created.status_code == 201 and 'id="new-token">ry_' in created.text
    wf = await publish_hook(client, "s", auth="header")
    await client.post(wf["webhook_path"], json={})
    deliveries = await client.get(f"/workflows/{wf['id']}/deliveries")
    assert deliveries.status_code == 200
    assert (
        'data-outcome="rejected"' in deliveries.text and "missing authorization" in deliveries.text
    )


async def test_a_webhook_url_that_starts_no_runs_says_why(client: httpx.AsyncClient) -> None:
    """Every workflow has its webhook URL from creation; a 404 there names the reason: no
    workflow, no published version, or a published version without a Webhook trigger."""
    unknown = await client.post("/hooks/" + "x" * 32, json={})
    assert unknown.status_code == 404 and "no workflow" in unknown.json()["detail"]
    created = await client.post("/api/workflows", json={"name": "draft only"})
    assert created.status_code == 201, created.text
    path = "/hooks/" + created.json()["webhook_url"].rsplit("/hooks/", 1)[1]
    draft = await client.post(path, json={})
    assert draft.status_code == 404 and "no published version" in draft.json()["detail"]
    manual = await publish(client, diagram([node("m", "trigger.manual")], []))
    answer = await client.post(manual["webhook_path"], json={})
    assert answer.status_code == 404
    assert (
        answer.json()["detail"] == "the published version of this workflow has no Webhook trigger"
    )
