"""Checking an error answer against the document's ``Problem`` component (RFC 9457
problem details, docs/api.md "Errors"), for the API convention tests."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema

from backend.problems import MEDIA_TYPE


async def problem_schema(client: httpx.AsyncClient) -> dict[str, Any]:
    """The ``Problem`` component with the document's other components resolvable."""
    doc = (await client.get("/schema/openapi.json")).json()
    components = doc["components"]["schemas"]
    schema = dict(components["Problem"])
    schema["components"] = {"schemas": components}
    return schema


def check_problem(r: httpx.Response, schema: dict[str, Any], status: int) -> dict[str, Any]:
    """The body of ``r``, asserted to be a problem of ``status`` valid against ``schema``
    whose ``instance`` is the path requested."""
    assert r.status_code == status, (r.request.url, r.text)
    assert r.headers["content-type"].startswith(MEDIA_TYPE), r.headers
    body = dict(r.json())
    jsonschema.validate(body, schema)
    assert body["status"] == status and body["instance"] == r.request.url.path
    assert body["type"] and body["title"] and isinstance(body["errors"], list)
    return body
