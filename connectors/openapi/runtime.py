"""Imported definitions -> an SDK ``Connector`` whose actions call the described API.

Each operation is an action ``<connector>.<key>``; its config schema is built from the
operation's fields (every field accepts an expression), a ``credential`` picker of the
credential types its security accepts, and, for an operation that pages, **Fetch all
pages** and **At most (pages)** (default 10, at most 1,000). Its output schema is the
success response's schema. With **Fetch all pages** the output keeps the shape of one
page, its array holding the items of every page fetched.

Several stored versions give the action several node-type versions (see
:func:`connector_of`): published workflows keep calling the operation as it was.

Base URL: the deployment setting ``<connector>.api_url`` when set, else the one read
from the document's ``servers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import msgspec
from jsonschema import Draft202012Validator

from connectors import sdk

from .auth import credential_type, sign
from .definition import ConnectorDefinition, OperationSpec
from .paging import fetch_all
from .requests import Request, build_request

FETCH_ALL = "fetch_all_pages"
MAX_PAGES = "max_pages"
PAGE_CAP = 1000


def config_schema(definition: ConnectorDefinition, op: OperationSpec) -> dict[str, Any]:
    """The JSON Schema of the config of ``op``'s node type."""
    props: dict[str, Any] = {}
    required: list[str] = []
    if op.credential_types:
        accepted: Any = (
            op.credential_types[0] if len(op.credential_types) == 1 else op.credential_types
        )
        props["credential"] = {
            "type": "string",
            "title": "Credential",
            "description": "Pick a saved credential; its secrets are never shown.",
            "x-credential-type": accepted,
        }
        if not op.credential_optional:
            required.append("credential")
    for spec in op.fields:
        props[spec.name] = spec.schema
        if spec.required:
            required.append(spec.name)
    if op.pagination is not None:
        props[FETCH_ALL] = {
            "type": "boolean",
            "default": False,
            "title": "Fetch all pages",
            "description": f"Follow the {op.pagination.kind} pagination and return every "
            "page's items together.",
        }
        props[MAX_PAGES] = {
            "type": "integer",
            "minimum": 1,
            "maximum": PAGE_CAP,
            "default": 10,
            "title": "At most (pages)",
        }
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


@dataclass(frozen=True)
class OpenApiAction(sdk.ActionDefinition):
    """An action whose config and output schemas come from the document."""

    schema: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] = field(default_factory=dict)

    def config_json_schema(self) -> dict[str, Any]:
        return msgspec.json.decode(msgspec.json.encode(self.schema))  # type: ignore[no-any-return]

    def output_json_schema(self) -> dict[str, Any]:
        return msgspec.json.decode(msgspec.json.encode(self.output))  # type: ignore[no-any-return]

    def parse_config(self, config: dict[str, Any]) -> Any:
        """``config`` checked against the schema, a required field left empty taking its
        schema's default (Notion's ``Notion-Version`` header); raises ``sdk.ConfigError``
        naming the field."""
        props = self.schema.get("properties") or {}
        for name in self.schema.get("required") or ():
            if config.get(name) is None and "default" in (props.get(name) or {}):
                config = {**config, name: props[name]["default"]}
        errors = sorted(
            Draft202012Validator(self.schema).iter_errors(config), key=lambda e: list(e.path)
        )
        if errors:
            error = errors[0]
            where = ".".join(str(p) for p in error.path) or "config"
            raise sdk.ConfigError(f"invalid config for {self.type}: {where}: {error.message}")
        return config


def action_of(definition: ConnectorDefinition, op: OperationSpec, version: int) -> OpenApiAction:
    """The action of ``op`` at node-type ``version``."""

    async def call(config: dict[str, Any], input: Any) -> Any:
        return await run_operation(definition, op, config)

    fields = tuple(f.name for f in op.fields)
    if op.pagination is not None:
        fields += (FETCH_ALL, MAX_PAGES)
    return OpenApiAction(
        type=f"{definition.name}.{op.key}",
        label=op.label,
        config_type=dict,
        fn=call,
        description=(op.description or op.label).split("\n")[0][:300],
        category=definition.label,
        expression_fields=fields,
        version=version,
        schema=config_schema(definition, op),
        output=op.output_schema,
    )


def connector_of(
    versions: Sequence[tuple[ConnectorDefinition, dict[str, int]]], *, source_version: str = ""
) -> sdk.Connector:
    """One connector from stored versions, oldest first: each ``(definition, {operation
    key: node-type version})``. An operation version present in several stored versions
    is the same behaviour and is registered once (with the latest label and description,
    see :mod:`.diff`); the latest definition names the
    connector, its label and its credential types (those of earlier versions are kept
    too, so a step pinned to an old version still finds its credential type)."""
    if not versions:
        raise ValueError("a connector needs at least one version")
    actions: dict[tuple[str, int], OpenApiAction] = {}
    credentials: dict[str, sdk.CredentialType] = {}
    for definition, numbers in versions:
        for op in definition.operations:
            number = numbers.get(op.key, 1)
            # an unchanged operation appears in several versions: the latest text wins
            actions[(op.key, number)] = action_of(definition, op, number)
        for spec in definition.credentials:
            credentials[spec.type] = credential_type(spec)
    latest = versions[-1][0]
    return sdk.Connector(
        name=latest.name,
        label=latest.label,
        version=source_version or latest.document_version or "1",
        description=latest.description.split("\n")[0][:300],
        actions=list(actions.values()),
        credential_types=list(credentials.values()),
        icon=latest.icon,
    )


async def _send(request: Request, definition: ConnectorDefinition) -> httpx.Response:
    client = sdk.http_client()
    headers = dict(request.headers)
    if request.cookies:  # a Cookie header: the client is shared, its cookie jar is not used
        headers["Cookie"] = "; ".join(
            f"{k}={quote(v, safe='')}" for k, v in request.cookies.items()
        )
    with sdk.http_errors(request.url, method=request.method, service=definition.label):
        response = await client.request(
            request.method,
            request.url,
            params=list(request.params) or None,  # type: ignore[arg-type]
            headers=headers,
            json=request.json,
            files=request.files,
            content=request.content,
        )
    sdk.raise_for_status(response)
    return response


def _body(response: httpx.Response) -> Any:
    if not response.content:
        return {"status": response.status_code}
    if "json" in response.headers.get("content-type", ""):
        try:
            return response.json()
        except ValueError:
            raise sdk.NonRetryableError(
                f"{response.request.method} {response.request.url} answered invalid JSON",
                kind="invalid_response",
            ) from None
    return {"text": response.text}


async def run_operation(
    definition: ConnectorDefinition, op: OperationSpec, config: dict[str, Any]
) -> Any:
    """Call ``op`` with ``config`` (validated, expressions resolved) and return the body."""
    base = sdk.setting(f"{definition.name}.api_url", "") or definition.base_url
    if not (base or op.server_url):
        raise sdk.ConfigError(
            f"{definition.label}: the document names no absolute server URL; set the "
            f"setting {definition.name}.api_url"
        )
    request = build_request(op, base, config)
    if config.get("credential"):
        credential = sdk.credential("credential")
        spec = next((c for c in definition.credentials if c.type == credential["type"]), None)
        if spec is None:
            raise sdk.ConfigError(f"credential type {credential['type']} is not this connector's")
        await sign(request, spec, credential)
    response = await _send(request, definition)
    data = _body(response)
    paging = op.pagination
    if paging is None or not config.get(FETCH_ALL):
        return data

    async def send(following: Request) -> tuple[httpx.Response, Any]:
        answer = await _send(following, definition)
        return answer, _body(answer)

    cap = min(int(config.get(MAX_PAGES) or 10), PAGE_CAP)
    return await fetch_all(op, paging, config, request, (response, data), send, cap)
