"""An OpenAPI 3.1 document (YAML) exercising what the public documents do not: server
variables, API keys in header, query and cookie, header and cookie parameters, a
``oneOf`` body, multipart bodies, OAuth2 client credentials, cursor and page pagination."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from connectors import sdk
from connectors.openapi.definition import ConnectorDefinition
from connectors.openapi.importer import build_definition
from connectors.openapi.loading import DocumentRefused, load_document
from connectors.openapi.runtime import connector_of
from connectors.testing import ActionTestEnvironment
from tests.openapi_server import Call, ScriptedApi

DOCUMENT = """
openapi: 3.1.0
info: {title: Acme, version: "2.1"}
servers:
  - url: https://{region}.acme.test/{base}
    variables:
      region: {default: eu, enum: [eu, us]}
      base: {default: v2}
security: [{headerKey: []}, {queryKey: []}, {cookieKey: []}, {machine: []}]
components:
  securitySchemes:
    headerKey: {type: apiKey, in: header, name: X-Acme-Key}
    queryKey: {type: apiKey, in: query, name: api_key}
    cookieKey: {type: apiKey, in: cookie, name: session}
    machine:
      type: oauth2
      flows:
        clientCredentials: {tokenUrl: https://acme.test/token, scopes: {items:read: Read}}
    oidc: {type: openIdConnect, openIdConnectUrl: https://acme.test/.well-known}
  schemas:
    Item:
      type: object
      required: [id]
      properties:
        id: {type: string}
        name: {type: [string, "null"]}
        secret: {type: string, writeOnly: true}
paths:
  /items:
    get:
      operationId: listItems
      parameters:
        - {name: cursor, in: query, schema: {type: string}}
        - {name: filter, in: query, style: deepObject, explode: true,
           schema: {type: object, additionalProperties: {type: string}}}
        - {name: X-Request-Tag, in: header, required: true, schema: {type: string}}
        - {name: tenant, in: cookie, schema: {type: string}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema:
                type: object
                properties:
                  items: {type: array, items: {$ref: "#/components/schemas/Item"}}
                  next_cursor: {type: [string, "null"]}
    post:
      operationId: createItem
      requestBody:
        required: true
        content:
          application/json:
            schema:
              oneOf:
                - $ref: "#/components/schemas/Item"
                - {type: array, items: {$ref: "#/components/schemas/Item"}}
      responses:
        "201":
          description: made
          content: {application/json: {schema: {$ref: "#/components/schemas/Item"}}}
  /items/{id}/attachments:
    post:
      operationId: attach
      parameters: [{name: id, in: path, required: true, schema: {type: integer}}]
      requestBody:
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                note: {type: string}
                meta: {type: object}
      responses: {"204": {description: done}}
  /pages:
    get:
      operationId: listPages
      parameters:
        - {name: page, in: query, schema: {type: integer}}
        - {name: per_page, in: query, schema: {type: integer}}
      responses:
        "200":
          description: ok
          content: {application/json: {schema: {type: array, items: {type: integer}}}}
  /secure:
    get:
      operationId: secure
      security: [{oidc: []}]
      responses: {"200": {description: ok}}
  /both:
    get:
      operationId: both
      security: [{headerKey: [], queryKey: []}]
      responses: {"200": {description: ok}}
  /raw/{name}:
    get:
      operationId: raw
      parameters: [{name: name, in: path, required: true, style: matrix, schema: {type: string}}]
      responses: {"200": {description: ok}}
    put:
      operationId: putXml
      parameters: [{name: name, in: path, required: true, schema: {type: string}}]
      requestBody:
        required: true
        content: {application/xml: {schema: {type: string}}}
      responses: {"200": {description: ok}}
"""


def _definition(**kwargs: Any) -> ConnectorDefinition:
    doc, version = load_document(DOCUMENT.encode())
    assert version == "3.1"
    return build_definition(doc, name="acme", openapi_version=version, **kwargs)


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    server = ScriptedApi().start()
    yield server
    server.stop()


async def _run(api: ScriptedApi, key: str, config: dict[str, Any], **credentials: Any) -> Any:
    connector = connector_of([(_definition(), {})])
    action = connector.get(f"acme.{key}")
    assert action is not None
    env = ActionTestEnvironment(
        settings={"acme.api_url": api.url},
        credentials=credentials,
        credential_types=list(connector.credential_types),
    )
    return await env.run(action, config, None)


def test_server_variables_refusals_and_types() -> None:
    definition = _definition()
    assert definition.base_url == "https://eu.acme.test/v2"
    assert _definition(server_variables={"region": "us"}).base_url == "https://us.acme.test/v2"
    with pytest.raises(DocumentRefused, match="must be one of"):
        _definition(server_variables={"region": "mars"})
    reasons = {r.operation_id: r.reason for r in definition.refused}
    assert reasons == {
        "secure": "security scheme oidc: type 'openIdConnect' is not supported",
        "both": "it needs headerKey and queryKey at once (one credential per step)",
        "raw": "path parameter name: style matrix is not supported",
        "putXml": "request body only as application/xml (supported: application/json, "
        "application/x-www-form-urlencoded, multipart/form-data, text/plain, +json)",
    }
    listing = definition.operation("list_items")
    assert listing is not None and listing.pagination is not None
    assert (listing.pagination.kind, listing.pagination.next_path) == ("cursor", ["next_cursor"])
    item = listing.output_schema["properties"]["items"]["items"]
    assert item["properties"]["name"]["type"] == ["string", "null"]
    assert "secret" not in item["properties"]  # writeOnly: not in a response
    create = definition.operation("create_item")
    assert create is not None
    assert [f.location for f in create.fields] == ["body_whole"]
    assert len(create.fields[0].schema["oneOf"]) == 2
    kinds = {c.scheme: c.kind for c in definition.credentials}
    assert kinds == {
        "headerKey": "api_key",
        "queryKey": "api_key",
        "cookieKey": "api_key",
        "machine": "client_credentials",
    }


async def test_header_query_cookie_parameters_and_api_keys(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (200, {"items": [], "next_cursor": None}, {})
    config = {"credential": "k", "x_request_tag": "t1", "tenant": "blue", "filter": {"a": "1"}}
    await _run(api, "list_items", config, k={"type": "acme.header_key", "api_key": "K1"})
    await _run(api, "list_items", config, k={"type": "acme.query_key", "api_key": "K2"})
    await _run(api, "list_items", config, k={"type": "acme.cookie_key", "api_key": "K3"})
    first, second, third = api.calls
    assert first.headers["x-acme-key"] == "K1" and first.headers["x-request-tag"] == "t1"
    assert first.query == [("filter[a]", "1")]
    assert first.headers["cookie"] == "tenant=blue"
    assert second.query == [("filter[a]", "1"), ("api_key", "K2")]
    assert sorted(third.headers["cookie"].split("; ")) == ["session=K3", "tenant=blue"]


async def test_cursor_pages_with_client_credentials(api: ScriptedApi) -> None:
    def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
        if call.path == "/token":
            assert call.form() == [("grant_type", "client_credentials"), ("scope", "items:read")]
            return 200, {"access_token": "cc-token", "expires_in": 600}, {}
        cursor = dict(call.query).get("cursor")
        if cursor is None:
            return 200, {"items": [{"id": "1"}], "next_cursor": "c2"}, {}
        return 200, {"items": [{"id": "2"}], "next_cursor": None}, {}

    api.answer = answer
    credential = {
        "type": "acme.machine",
        "client_id": "app",
        "client_secret": "pw",
        "token_url": f"{api.url}/token",
    }
    out = await _run(
        api,
        "list_items",
        {"credential": "m", "x_request_tag": "t", "fetch_all_pages": True},
        m=credential,
    )
    assert out == {"items": [{"id": "1"}, {"id": "2"}], "next_cursor": None}
    token_call, *calls = api.calls
    assert token_call.headers["authorization"].startswith("Basic ")
    assert {c.headers["authorization"] for c in calls} == {"Bearer cc-token"}
    assert [dict(c.query).get("cursor") for c in calls] == [None, "c2"]


async def test_page_pagination_stops_on_a_short_page(api: ScriptedApi) -> None:
    pages = {1: [1, 2], 2: [3, 4], 3: [5]}
    api.answer = lambda call, url: (200, pages[int(dict(call.query)["page"])], {})
    out = await _run(
        api,
        "list_pages",
        {"credential": "k", "page": 1, "per_page": 2, "fetch_all_pages": True},
        k={"type": "acme.header_key", "api_key": "K"},
    )
    assert out == [1, 2, 3, 4, 5]
    assert len(api.calls) == 3


async def test_one_of_body_and_multipart(api: ScriptedApi) -> None:
    api.answer = lambda call, url: (201, {"id": "9"}, {})
    key = {"type": "acme.header_key", "api_key": "K"}
    await _run(api, "create_item", {"credential": "k", "body": [{"id": "a"}]}, k=key)
    assert api.calls[0].json() == [{"id": "a"}]
    await _run(api, "attach", {"credential": "k", "id": 5, "note": "hi", "meta": {"a": 1}}, k=key)
    call = api.calls[1]
    assert call.path == "/items/5/attachments"
    assert call.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="note"\r\nContent-Type: text/plain\r\n\r\nhi' in call.body
    assert b'{"a":1}' in call.body


async def test_config_is_checked_against_the_schema(api: ScriptedApi) -> None:
    key = {"type": "acme.header_key", "api_key": "K"}
    with pytest.raises(sdk.ConfigError, match="id: 'x' is not of type 'integer'"):
        await _run(api, "attach", {"credential": "k", "id": "x"}, k=key)
