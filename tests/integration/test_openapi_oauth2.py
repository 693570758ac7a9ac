"""An imported operation secured by OAuth2 (authorization code): the credential type comes
from the document's security scheme (authorization and token URLs filled in), is connected
through Railyard's OAuth2 flow against a local provider, and the step sends the token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.fakes.oauth2_provider import OAuth2Provider, serving_provider
from tests.integration.conftest import wait_for_run
from tests.integration.encrypted_settings import settings  # noqa: F401  (the fixture)
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id
from tests.openapi_server import Call, ScriptedApi

pytestmark = pytest.mark.integration

CALLBACK = "http://testserver.local/api/credentials/oauth2/callback"
SECRET = "cs-openapi-0123456789-secret"

DOCUMENT = """
openapi: 3.0.3
info: {title: Notes, version: "1"}
servers: [{url: "SERVER"}]
security: [{login: [read]}]
components:
  securitySchemes:
    login:
      type: oauth2
      flows:
        authorizationCode:
          authorizationUrl: PROVIDER/authorize
          tokenUrl: PROVIDER/token
          scopes: {read: Read notes}
  schemas:
    Notes: {type: object, properties: {notes: {type: array, items: {type: string}}}}
  responses:
    notes:
      description: the notes
      content: {application/json: {schema: {$ref: "#/components/schemas/Notes"}}}
paths:
  /notes:
    get: {operationId: listNotes, responses: {"200": {$ref: "#/components/responses/notes"}}}
"""


@pytest.fixture
def provider() -> Iterator[OAuth2Provider]:
    with serving_provider("railyard", SECRET, CALLBACK) as running:
        yield running


@pytest.fixture
def notes() -> Iterator[ScriptedApi]:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        return 200, {"notes": ["a", "b"]}, {}

    server = ScriptedApi(answer=answer).start()
    yield server
    server.stop()


async def test_oauth2_scheme_connects_and_the_step_sends_the_token(
    client: httpx.AsyncClient,
    runtime: Runtime,
    worker: Any,
    provider: OAuth2Provider,
    notes: ScriptedApi,
) -> None:
    document = DOCUMENT.replace("SERVER", notes.url).replace("PROVIDER", provider.url)
    r = await client.post("/api/v1/admin/connectors", json={"name": "notes", "document": document})
    assert r.status_code == 201, r.text
    types = (await client.get("/api/v1/credentials/types")).json()["data"]
    ctype = next(t for t in types if t["name"] == "notes.login")
    assert ctype["kind"] == "oauth2"
    defaults = {k: v.get("default") for k, v in ctype["schema"]["properties"].items()}
    assert defaults["authorize_url"] == provider.url + "/authorize"
    assert defaults["token_url"] == provider.url + "/token"
    assert defaults["scope"] == "read"
    r = await client.post(
        "/api/v1/credentials",
        json={
            "name": "Notes",
            "type": "notes.login",
            "data": {"client_id": "railyard", "client_secret": SECRET},
        },
    )
    assert r.status_code == 201, r.text
    cred = r.json()["id"]
    start = await client.get(f"/api/v1/credentials/{cred}/connect")
    assert start.status_code in (302, 303), start.text
    async with httpx.AsyncClient() as browser:
        consent = await browser.get(start.headers["location"])
    assert consent.status_code == 302, (start.headers["location"], consent.text)
    back = urlsplit(consent.headers["location"])
    done = await client.get(f"{back.path}?{back.query}")
    assert done.status_code in (302, 303), done.text
    assert done.headers["location"] == f"/credentials?connected={cred}", done.headers["location"]

    step = node("list", "notes.list_notes", credential=cred)
    wf = await publish(
        client, diagram([node("start", "trigger.manual"), step], [edge("start", "list")])
    )
    run_id = await start_manual(client, wf, {})
    status = await wait_for_run(runtime, run_id)
    assert status == "succeeded", steps_by_id(await run_detail(client, run_id))["list"]["error"]
    assert steps_by_id(await run_detail(client, run_id))["list"]["output"] == {"notes": ["a", "b"]}
    (call,) = notes.calls
    scheme, _, token = call.headers["authorization"].partition(" ")
    assert scheme == "Bearer" and token
    async with httpx.AsyncClient() as check:
        me = await check.get(provider.url + "/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200  # the provider's own token, obtained by the Connect flow
