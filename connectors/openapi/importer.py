"""A validated OpenAPI document -> a :class:`~.definition.ConnectorDefinition`.

Every operation (each method of each path) is either imported or listed in
``refused`` with the reason; none is left out silently. An operation is refused when it
needs what a step cannot express: a path parameter the path does not declare, a
parameter style other than those :data:`STYLES` lists, a parameter given by a
non-JSON ``content``, a required request body in no media type of
:data:`BODY_MEDIA_TYPES`, or only security schemes :mod:`.security` cannot use.

Fields: each parameter is a config field (named after it, made an identifier; on a
clash between places the later one gets its place as prefix: ``query_id``); an object
request body gives one field per property (required when the body's schema requires
it, even where the body itself is optional: a body sent must hold it), any other body
one field ``body``. Header
parameters ``Accept``, ``Content-Type`` and ``Authorization`` are ignored, as OpenAPI
says they are.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin

from .definition import ConnectorDefinition, FieldSpec, Location, OperationSpec, Refusal
from .loading import DocumentRefused
from .pagination import detect
from .parts import file_schema, is_binary
from .schemas import SchemaConverter, flat_type, resolve
from .security import credential_specs, operation_credentials, slug

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
STYLES = {
    "path": ("simple",),
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "header": ("simple",),
    "cookie": ("form",),
}
BODY_MEDIA_TYPES = (
    "application/json",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
    "text/plain",
)
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
NO_CONTENT = {
    "type": "object",
    "description": "The answer has no body: its HTTP status",
    "properties": {"status": {"type": "integer", "description": "The HTTP status (204, ...)"}},
}
"""The output of an operation whose success response has no content."""
SUCCESS_CODES = ("200", "201", "202", "203", "206", "2XX", "204", "default")


class OperationRefused(ValueError):
    """This operation cannot be expressed as a step (the message says why)."""


def base_url(
    doc: dict[str, Any], variables: dict[str, str] | None = None, source_url: str = ""
) -> str:
    """The first server's URL with its variables set (``variables`` first, then each
    variable's ``default``), made absolute against ``source_url`` when relative.

    Raises :class:`DocumentRefused` for a value outside a variable's ``enum`` or a
    variable given that the server does not declare."""
    servers = doc.get("servers") or [{"url": "/"}]
    server = servers[0]
    declared = server.get("variables") or {}
    given = dict(variables or {})
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise DocumentRefused(f"server variables {unknown} are not declared by {server['url']}")
    url = str(server.get("url", "/"))
    for name, spec in declared.items():
        value = str(given.get(name, spec.get("default", "")))
        options = spec.get("enum")
        if options and value not in options:
            raise DocumentRefused(f"server variable {name} must be one of {options}, not {value!r}")
        url = url.replace("{" + name + "}", value)
    if not re.match(r"^https?://", url):
        url = urljoin(source_url, url) if source_url else ""
    return url.rstrip("/")


def build_definition(
    doc: dict[str, Any],
    *,
    name: str,
    label: str = "",
    openapi_version: str = "",
    server_variables: dict[str, str] | None = None,
    source_url: str = "",
    icon: str = "globe",
) -> ConnectorDefinition:
    """Read every operation of the (validated) ``doc`` for connector ``name``."""
    usable, unusable = credential_specs(doc, name)
    operations: list[OperationSpec] = []
    refused: list[Refusal] = []
    keys: set[str] = set()
    for path, raw_item in (doc.get("paths") or {}).items():
        item = resolve(doc, raw_item)
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            op_id = str(op.get("operationId") or "")
            try:
                spec = _operation(doc, name, path, method, item, op, usable, unusable, keys)
            except (OperationRefused, DocumentRefused) as err:
                reason = err.reason if isinstance(err, DocumentRefused) else str(err)
                refused.append(
                    Refusal(method=method.upper(), path=path, operation_id=op_id, reason=reason)
                )
                continue
            keys.add(spec.key)
            operations.append(spec)
    info = doc.get("info") or {}
    return ConnectorDefinition(
        name=name,
        label=label or str(info.get("title") or name),
        description=str(info.get("description") or "")[:2000],
        openapi_version=openapi_version,
        title=str(info.get("title") or ""),
        document_version=str(info.get("version") or ""),
        base_url=base_url(doc, server_variables, source_url),
        icon=icon,
        credentials=list(usable.values()),
        operations=operations,
        refused=refused,
    )


def _operation(
    doc: dict[str, Any],
    connector: str,
    path: str,
    method: str,
    item: dict[str, Any],
    op: dict[str, Any],
    usable: Any,
    unusable: Any,
    keys: set[str],
) -> OperationSpec:
    security = op["security"] if "security" in op else doc.get("security")
    credentials, optional, reason = operation_credentials(security, usable, unusable)
    if reason:
        raise OperationRefused(reason)
    converter = SchemaConverter(doc, "request")
    fields = _parameters(doc, path, item, op, converter)
    body_media, body_required = "", False
    body = op.get("requestBody")
    if body is not None:
        body_media, body_required, body_fields = _body(doc, resolve(doc, body), fields, converter)
        fields += body_fields
    output_schema, headers = _success(doc, op)
    op_id = str(op.get("operationId") or "")
    key = slug(op_id or f"{method}_{path}", 60)
    base, n = key, 2
    while key in keys:
        key, n = f"{base[:56]}_{n}", n + 1
    label = str(op.get("summary") or op_id or f"{method.upper()} {path}").strip()
    servers = op.get("servers") or item.get("servers") or []
    server_url = str(servers[0].get("url", "")) if servers else ""
    if server_url and not re.match(r"^https?://", server_url):
        server_url = ""  # relative: the connector's base URL serves it
    return OperationSpec(
        key=key,
        operation_id=op_id,
        method=method.upper(),
        path=path,
        label=label[:120],
        description=str(op.get("description") or "")[:2000],
        tags=[str(t) for t in op.get("tags") or ()],
        fields=fields,
        body_media_type=body_media,
        body_required=body_required,
        credential_types=credentials,
        credential_optional=optional,
        output_schema=output_schema,
        pagination=detect(op, fields, output_schema, headers, body_media),
        server_url=server_url,
    )


def _field_name(wanted: str, location: str, taken: set[str]) -> str:
    name = slug(wanted, 60)
    if name in taken or name in ("credential", "fetch_all_pages", "max_pages", "on_error"):
        name = slug(f"{location}_{wanted}", 60)
    base, n = name, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def _described(schema: dict[str, Any], title: str, description: Any) -> dict[str, Any]:
    out = {**schema, "title": title}
    if description:
        out["description"] = str(description)[:1000]
    return out


def _parameters(
    doc: dict[str, Any],
    path: str,
    item: dict[str, Any],
    op: dict[str, Any],
    converter: SchemaConverter,
) -> list[FieldSpec]:
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(item.get("parameters") or ()), *(op.get("parameters") or ())]:
        param = resolve(doc, raw)
        merged[(param["name"], param["in"])] = param
    declared = {name for name, where in merged if where == "path"}
    for template in re.findall(r"{([^}]+)}", path):
        if template not in declared:
            raise OperationRefused(f"path parameter {{{template}}} is not declared")
    taken: set[str] = set()
    fields: list[FieldSpec] = []
    for (wire, where_text), param in merged.items():
        where: Location = where_text  # type: ignore[assignment]  # the validator checked it
        if where == "header" and wire.lower() in IGNORED_HEADERS:
            continue
        style = str(param.get("style") or ("form" if where in ("query", "cookie") else "simple"))
        if style not in STYLES[where]:
            raise OperationRefused(f"{where} parameter {wire}: style {style} is not supported")
        as_json = False
        if "content" in param:
            media, content = next(iter(param["content"].items()))
            if "json" not in media:
                raise OperationRefused(f"{where} parameter {wire} is sent as {media}")
            schema, as_json = converter.convert(content.get("schema") or {}), True
        else:
            schema = converter.convert(param.get("schema") or {})
        name = _field_name(wire, where, taken)
        fields.append(
            FieldSpec(
                name=name,
                location=where,
                wire_name=wire,
                schema=_described(schema, wire, param.get("description")),
                required=bool(param.get("required")) or where == "path",
                style=style,
                explode=bool(param.get("explode", style == "form")),
                as_json=as_json,
            )
        )
    return fields


def _body(
    doc: dict[str, Any], body: dict[str, Any], fields: list[FieldSpec], converter: SchemaConverter
) -> tuple[str, bool, list[FieldSpec]]:
    content = body.get("content") or {}
    required = bool(body.get("required"))
    media = next(
        (m for m in content if m.split(";")[0].strip() in BODY_MEDIA_TYPES or m.endswith("+json")),
        None,
    )
    if media is None:
        if not content:
            return "", False, []
        raise OperationRefused(
            f"request body only as {', '.join(content)} (supported: "
            f"{', '.join(BODY_MEDIA_TYPES)}, +json)"
        )
    schema = converter.convert(content[media].get("schema") or {})
    taken = {f.name for f in fields}
    props = schema.get("properties")
    if flat_type(schema) == "object" and not props and schema.get("additionalProperties") is False:
        return media, False, []  # a body that can hold nothing (Stripe's GET operations)
    if flat_type(schema) == "object" and props and not schema.get("oneOf"):
        needed = set(schema.get("required") or ())
        multipart = media.split(";")[0].strip() == "multipart/form-data"
        body_fields = []
        for prop, sub in props.items():
            binary = multipart and (is_binary(sub) or _binary_encoding(content[media], prop))
            schema = file_schema(sub) if binary else sub
            body_fields.append(
                FieldSpec(
                    name=_field_name(prop, "body", taken),
                    location="body",
                    wire_name=prop,
                    schema=_described(schema, prop, sub.get("description")),
                    required=prop in needed,
                    style=_encoding_style(content[media], prop),
                    file=binary,
                    content_type=_encoding_type(content[media], prop) if binary else "",
                )
            )
        return media, required, body_fields
    whole = FieldSpec(
        name=_field_name("body", "body", taken),
        location="body_whole",
        wire_name="",
        schema=_described(schema, "Body", body.get("description")),
        required=required,
    )
    return media, required, [whole]


def _encoding_style(media: dict[str, Any], prop: str) -> str:
    encoding = (media.get("encoding") or {}).get(prop) or {}
    return str(encoding.get("style") or "")


def _binary_encoding(media: dict[str, Any], prop: str) -> bool:
    """The body's ``encoding`` gives ``prop`` a media type that is neither text nor JSON
    (``image/png``, ``application/octet-stream``): its part is a file."""
    kind = _encoding_type(media, prop)
    return bool(kind) and not (kind.startswith("text/") or "json" in kind)


def _encoding_type(media: dict[str, Any], prop: str) -> str:
    encoding = (media.get("encoding") or {}).get(prop) or {}
    text = str(encoding.get("contentType") or "").split(",")[0].strip()
    return "" if "*" in text else text


def _success(doc: dict[str, Any], op: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The converted JSON schema and declared headers of the success response."""
    responses = op.get("responses") or {}
    code = next((c for c in SUCCESS_CODES if c in responses), None)
    if code is None:
        code = next((c for c in responses if str(c).startswith("2")), None)
    if code is None:
        return {}, {}
    response = resolve(doc, responses[code])
    headers = response.get("headers") or {}
    content = response.get("content") or {}
    media = next((m for m in content if "json" in m), None)
    if media is None:
        if content:
            return {"type": "object", "properties": {"text": {"type": "string"}}}, headers
        return NO_CONTENT, headers
    schema = SchemaConverter(doc, "response").convert(content[media].get("schema") or {})
    return schema, headers
