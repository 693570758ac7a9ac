"""The stored form of an imported OpenAPI connector (msgspec Structs, JSON in PostgreSQL).

A :class:`ConnectorDefinition` holds everything a call needs, so a run never reads the
document again: per operation its method, path, parameters (where each goes and how it is
serialised), body media type, accepted credential types, output schema and pagination.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

Location = Literal["path", "query", "header", "cookie", "body", "body_whole"]
"""Where a field's value goes: a parameter's ``in``, one property of an object body
(``body``) or the whole body (``body_whole``)."""

CredentialKind = Literal["api_key", "basic", "bearer", "oauth2", "client_credentials"]


class FieldSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One config field of an operation: ``name`` in the config, ``wire_name`` on the wire."""

    name: str
    location: Location
    wire_name: str
    schema: dict[str, Any] = {}
    required: bool = False
    style: str = ""
    explode: bool = True
    as_json: bool = False
    """A parameter declared with ``content: application/json``: sent as JSON text."""
    file: bool = False
    """A binary part of a ``multipart/form-data`` body (``format: binary``, or a
    ``contentMediaType``; a list of them when the property is an array): the value is a
    file reference ``{filename, content_type, base64}`` or text (see :mod:`.parts`)."""
    content_type: str = ""
    """The part's media type from the body's ``encoding`` (``""``: the file's own, else
    ``application/octet-stream``)."""


class CredentialSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A credential type made from one security scheme (``scheme``: its name in the document).

    ``kind``: ``api_key`` (sent in ``location`` as ``param_name``), ``basic``, ``bearer``,
    ``oauth2`` (authorization code, the product's Connect flow) or ``client_credentials``
    (OAuth2 client credentials, RFC 6749 §4.4, fetched by the action)."""

    type: str
    scheme: str
    label: str
    kind: CredentialKind
    description: str = ""
    location: str = ""
    param_name: str = ""
    authorize_url: str = ""
    token_url: str = ""
    scopes: list[str] = []


class Pagination(msgspec.Struct, frozen=True, kw_only=True):
    """How an operation's pages follow each other.

    - ``cursor``: send ``param`` = the value at ``next_path`` of the last response (or,
      with ``next_path`` empty, the ``id`` of the last item: Stripe's ``starting_after``),
      while ``has_more_path`` (when set) is true and a page is not empty;
    - ``page``: send ``param`` = 1, 2, ... until a page is empty or shorter than the
      ``size_param`` asked for;
    - ``offset``: send ``param`` = the number of items received so far (plus the first
      offset asked for: Jira's ``startAt``) until a page is empty, the offset reaches the
      value at ``total_path``, the value at ``last_path`` is true, or (neither declared) a
      page is shorter than the ``size_param`` asked for;
    - ``link``: follow the ``rel="next"`` URL of the ``Link`` header (RFC 8288).

    ``param_in``: where ``param`` goes, ``query`` or ``body`` (a property of the JSON
    request body: Notion's ``start_cursor``). ``items_path``: where the page's array is in
    the response body (``[]``: the body)."""

    kind: Literal["cursor", "page", "offset", "link"]
    items_path: list[str] = []
    param: str = ""
    param_in: Literal["query", "body"] = "query"
    next_path: list[str] = []
    has_more_path: list[str] = []
    total_path: list[str] = []
    last_path: list[str] = []
    size_param: str = ""


class OperationSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One importable operation: node type ``<connector>.<key>``."""

    key: str
    operation_id: str
    method: str
    path: str
    label: str
    description: str = ""
    tags: list[str] = []
    fields: list[FieldSpec] = []
    body_media_type: str = ""
    body_required: bool = False
    credential_types: list[str] = []
    credential_optional: bool = True
    output_schema: dict[str, Any] = {}
    pagination: Pagination | None = None
    server_url: str = ""
    """An operation-level server overriding the connector's base URL (``""``: none)."""


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """An operation the importer cannot express, and why."""

    method: str
    path: str
    operation_id: str
    reason: str


class ConnectorDefinition(msgspec.Struct, frozen=True, kw_only=True):
    """An imported document as Railyard runs it."""

    name: str
    label: str
    description: str = ""
    openapi_version: str = ""
    title: str = ""
    document_version: str = ""
    base_url: str = ""
    icon: str = "globe"
    credentials: list[CredentialSpec] = []
    operations: list[OperationSpec] = []
    refused: list[Refusal] = []

    def operation(self, key: str) -> OperationSpec | None:
        """The operation whose node type ends in ``key``, or ``None``."""
        return next((o for o in self.operations if o.key == key), None)


def encode_definition(definition: ConnectorDefinition) -> dict[str, Any]:
    """JSON-able builtins of ``definition`` (for a JSONB column)."""
    return msgspec.to_builtins(definition)  # type: ignore[no-any-return]


def decode_definition(data: Any) -> ConnectorDefinition:
    """Read back :func:`encode_definition`'s output; raises ``msgspec.ValidationError``."""
    return msgspec.convert(data, ConnectorDefinition)
