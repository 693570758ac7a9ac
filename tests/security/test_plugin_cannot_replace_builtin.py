"""Finding 7: a plugin cannot replace a built-in node type and so receive the credentials
of every HTTP Request step.

The catalog used to keep the first connector that declared a node type, in entry-point
order: a plugin named to load before ``http`` and declaring ``http.request`` ran every
HTTP Request step, with its decrypted credential. The catalog now loads the built-in
connectors first and refuses a plugin declaring another connector's node type
(backend/services/connectors/catalog.py; its rules: tests/unit/services/test_catalog_isolation.py).
This is the attack end to end: the plugin installed, a workflow run, the credential used.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint
from types import SimpleNamespace
from typing import Any

import httpx
import msgspec
import pytest

from backend.app import create_app
from backend.runtime import Runtime, build_runtime
from backend.services.connectors import discovery
from backend.services.identity import accounts
from backend.settings import Settings
from connectors import sdk
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import ADMIN_PASSWORD, login, running_worker, wait_for_run
from tests.integration.flows import publish

pytestmark = pytest.mark.integration

API_KEY = "ak-victim-0c61d7e2"
STOLEN: list[dict[str, Any]] = []


class EvilConfig(msgspec.Struct):
    url: str = ""
    credential: str | None = None


@sdk.action("http.request", label="HTTP Request", config=EvilConfig)
async def _steal(config: EvilConfig, input: Any) -> dict[str, Any]:
    STOLEN.append(sdk.credential("credential") if config.credential else {})
    return {"status": 200, "headers": {}, "body": None, "url": config.url}


evil = sdk.Connector("aaa", "Helpful tools", "6.6.6", actions=[_steal])


async def test_a_plugin_cannot_take_over_http_request(
    settings: Settings, runtime: Runtime, sink: HttpSink, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = discovery.entry_points
    plugin = EntryPoint(name="aaa", value=f"{__name__}:evil", group=discovery.ENTRY_POINT_GROUP)
    plugin = plugin._for(SimpleNamespace(name="aaa-helpful-tools", version="6.6.6"))  # type: ignore[attr-defined]
    monkeypatch.setattr(discovery, "entry_points", lambda group: [plugin, *real(group=group)])
    STOLEN.clear()

    del runtime  # the clean tables it leaves; this test builds its own with the plugin
    rt = await build_runtime(settings, pool_size=3)
    try:
        assert any(
            "connector aaa (aaa-helpful-tools 6.6.6) declares http.request" in e
            for e in rt.catalog.errors
        ), rt.catalog.errors
        transport = httpx.ASGITransport(app=create_app(settings, rt))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver.local") as c:
            async with rt.sessionmaker() as session, session.begin():
                await accounts.create_user(
                    session, "owner@example.com", ADMIN_PASSWORD, role="admin"
                )
            await login(c, "owner@example.com", ADMIN_PASSWORD)
            cred = (
                await c.post(
                    "/api/credentials",
                    json={"name": "k", "type": "api_key", "data": {"api_key": API_KEY}},
                )
            ).json()["id"]
            types = {n["type"]: n for n in (await c.get("/api/catalog")).json()["node_types"]}
            assert types["http.request"]["connector"] == "http"
            wf = await publish(
                c,
                diagram(
                    [
                        node("hook", "trigger.webhook"),
                        node("call", "http.request", url=sink.url, credential=cred),
                    ],
                    [edge("hook", "call")],
                ),
            )
            async with running_worker(settings):
                run = (await c.post(wf["webhook_path"], json={})).json()["run_id"]
                assert await wait_for_run(rt, run) == "succeeded"
    finally:
        await rt.close()
    assert STOLEN == []  # the plugin's code never ran, never saw the credential
    assert [r.headers.get("x-api-key") for r in sink.requests] == [API_KEY]  # the built-in ran
