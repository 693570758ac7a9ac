"""``multipart/form-data`` bodies with binary parts: the importer makes file fields of
``format: binary`` (OpenAPI 3.0), ``contentMediaType`` (3.1) and binary ``encoding``
properties, and a step sends a file reference's bytes (or text) as a file part next to
the plain parts, checked by a local server parsing the body as RFC 7578 says."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from typing import Any

import pytest

from connectors import sdk
from connectors.openapi.importer import build_definition
from connectors.openapi.loading import load_document
from connectors.openapi.runtime import connector_of
from connectors.testing import ActionTestEnvironment
from tests.openapi_server import ScriptedApi
from tests.unit.openapi.multipart_parts import parts

DOCUMENT_30 = """
openapi: 3.0.3
info: {title: Media, version: "1"}
servers: [{url: "https://media.example"}]
paths:
  /uploads:
    post:
      operationId: upload
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema:
              type: object
              required: [photo]
              properties:
                photo: {type: string, format: binary}
                attachments: {type: array, items: {type: string, format: binary}}
                scan: {type: string}
                caption: {type: string}
                meta: {type: object, properties: {album: {type: string}}}
            encoding:
              photo: {contentType: "image/png, image/jpeg"}
              scan: {contentType: application/pdf}
      responses:
        "201":
          description: stored
          content:
            application/json:
              schema: {type: object, properties: {id: {type: string}}}
"""

DOCUMENT_31 = """
openapi: 3.1.0
info: {title: Media, version: "1"}
servers: [{url: "https://media.example"}]
paths:
  /uploads:
    post:
      operationId: upload
      requestBody:
        content:
          multipart/form-data:
            schema:
              type: object
              properties:
                photo: {type: string, contentMediaType: application/octet-stream}
                caption: {type: string}
      responses:
        "201": {description: stored}
"""

PNG = b"\x89PNG\r\n\x1a\n" + os.urandom(3000)


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    server = ScriptedApi(answer=lambda call, url: (201, {"id": "up_1"}, {})).start()
    yield server
    server.stop()


def _connector(text: str) -> sdk.Connector:
    doc, version = load_document(text.encode())
    return connector_of([(build_definition(doc, name="media", openapi_version=version), {})])


async def _upload(connector: sdk.Connector, api: ScriptedApi, config: dict[str, Any]) -> Any:
    action = connector.get("media.upload")
    assert action is not None
    env = ActionTestEnvironment(settings={"media.api_url": api.url})
    return await env.run(action, config, None)


def test_binary_properties_become_file_fields() -> None:
    doc, version = load_document(DOCUMENT_30.encode())
    op = build_definition(doc, name="media", openapi_version=version).operation("upload")
    assert op is not None
    files = {f.name: (f.file, f.content_type) for f in op.fields}
    assert files == {
        "photo": (True, "image/png"),
        "attachments": (True, ""),
        "scan": (True, "application/pdf"),  # a string the encoding calls binary
        "caption": (False, ""),
        "meta": (False, ""),
    }
    schema = _connector(DOCUMENT_30).get("media.upload").config_json_schema()  # type: ignore[union-attr]
    photo = schema["properties"]["photo"]
    assert {o.get("type") for o in photo["anyOf"]} == {"object", "string"}
    assert schema["properties"]["attachments"]["type"] == "array"
    doc, version = load_document(DOCUMENT_31.encode())
    op = build_definition(doc, name="media", openapi_version=version).operation("upload")
    assert op is not None and [f.name for f in op.fields if f.file] == ["photo"]


async def test_file_references_and_text_are_sent_as_file_parts(api: ScriptedApi) -> None:
    photo = {
        "filename": "cat.png",
        "content_type": "image/png",
        "size": len(PNG),
        "base64": base64.b64encode(PNG).decode(),
    }
    notes = {"filename": "notes.txt", "base64": base64.b64encode(b"a\nb\n").decode()}
    out = await _upload(
        _connector(DOCUMENT_30),
        api,
        {
            "photo": photo,
            "attachments": [notes, "plain text"],
            "caption": "Cat",
            "meta": {"album": "pets"},
        },
    )
    assert out == {"id": "up_1"}
    (call,) = api.calls
    assert call.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert parts(call) == [
        ("photo", "cat.png", "image/png", PNG),
        ("attachments", "notes.txt", "application/octet-stream", b"a\nb\n"),
        ("attachments", "attachments", "text/plain", b"plain text"),
        ("caption", None, "text/plain", b"Cat"),
        ("meta", None, "application/json", b'{"album":"pets"}'),
    ]


async def test_the_encoding_media_type_is_used_when_the_file_has_none(api: ScriptedApi) -> None:
    await _upload(
        _connector(DOCUMENT_30),
        api,
        {"photo": {"base64": base64.b64encode(PNG).decode()}, "scan": "%PDF-1.7"},
    )
    assert parts(api.calls[0]) == [
        ("photo", "photo", "image/png", PNG),
        ("scan", "scan", "application/pdf", b"%PDF-1.7"),
    ]
    api.calls.clear()
    await _upload(_connector(DOCUMENT_31), api, {"photo": {"base64": "AAEC"}, "caption": "x"})
    assert parts(api.calls[0])[0] == ("photo", "photo", "application/octet-stream", b"\0\1\2")


async def test_bad_files_are_clear_config_errors(api: ScriptedApi) -> None:
    connector = _connector(DOCUMENT_30)
    with pytest.raises(sdk.ConfigError, match="photo: the file's base64 content is not valid"):
        await _upload(connector, api, {"photo": {"filename": "x", "base64": "not base64!"}})
    with pytest.raises(sdk.ConfigError, match="photo"):
        await _upload(connector, api, {"photo": 42})
    assert api.calls == []
