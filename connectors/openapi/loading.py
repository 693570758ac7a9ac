"""Reading an OpenAPI document safely: bytes -> a validated OpenAPI 3.0/3.1 object.

What is refused, each with a :class:`DocumentRefused` naming the rule and where:

- more than ``max_bytes`` (default :data:`MAX_DOCUMENT_BYTES`, 16 MiB: Stripe's full
  description is about 4 MiB, GitHub's about 12 MiB);
- YAML anchors and aliases (``&a`` / ``*a``): a handful of aliases can stand for billions
  of nodes (the "billion laughs" document), so none is accepted; YAML tags beyond the
  standard JSON types (PyYAML's ``SafeLoader``: no Python objects);
- nesting deeper than :data:`MAX_DEPTH` (64) levels and more than :data:`MAX_NODES`
  (5,000,000) values;
- a ``$ref`` that leaves the document (``other.yaml#/...``, ``https://...``): Railyard
  never fetches what a document points to; a ``$ref`` that does not resolve;
- anything ``openapi-spec-validator`` (the OpenAPI Initiative's JSON Schemas of 3.0 and
  3.1) rejects; Swagger 2.0 and other versions.

Time and memory are bounded by the byte cap: the parse and every walk are linear in the
document's size, and no reference is ever expanded here (see :mod:`connectors.openapi.refs`).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 5_000_000


class DocumentRefused(ValueError):
    """The document cannot be imported; ``where`` is a JSON pointer or a line (or ``""``)."""

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(f"{message} (at {where})" if where else message)
        self.reason = message
        self.where = where


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing anchors and aliases outright."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            mark = event.start_mark
            raise DocumentRefused(
                "YAML aliases are not accepted (a few aliases can expand to billions of "
                "values); write the document without anchors (&) and aliases (*)",
                f"line {mark.line + 1}, column {mark.column + 1}",
            )
        event = self.peek_event()
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            mark = event.start_mark
            raise DocumentRefused(
                f"YAML anchor &{anchor} is not accepted: write the document without anchors "
                "and aliases",
                f"line {mark.line + 1}, column {mark.column + 1}",
            )
        return super().compose_node(parent, index)


def parse_document(data: bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> dict[str, Any]:
    """Parse JSON or YAML ``data`` into a dict, checking size, aliases, depth and node count.

    Raises :class:`DocumentRefused`."""
    if len(data) > max_bytes:
        raise DocumentRefused(
            f"the document has {len(data):,} bytes; at most {max_bytes:,} are accepted"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DocumentRefused(f"the document is not UTF-8 text: {err}") from None
    stripped = text.lstrip()
    doc: Any
    if stripped.startswith("{"):
        try:
            doc = json.loads(text)
        except RecursionError:
            raise DocumentRefused(f"the document nests deeper than {MAX_DEPTH} levels") from None
        except ValueError as err:
            # a YAML document in flow style (`{openapi: 3.1.0, ...}`) starts with "{" too;
            # a JSON object's first key is quoted, so broken JSON keeps its JSON error
            if stripped[1:].lstrip().startswith('"'):
                raise DocumentRefused(f"the document is not valid JSON: {err}") from None
            doc = _load_yaml(text)
    else:
        doc = _load_yaml(text)
    if not isinstance(doc, dict):
        raise DocumentRefused("an OpenAPI document is an object at its top level")
    _check_shape(doc)
    return doc


def _load_yaml(text: str) -> Any:
    """``text`` read as YAML without anchors or aliases. Raises :class:`DocumentRefused`."""
    try:
        return yaml.load(text, Loader=_NoAliasLoader)
    except DocumentRefused:
        raise
    except RecursionError:
        raise DocumentRefused(f"the document nests deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as err:
        raise DocumentRefused(f"the document is neither JSON nor valid YAML: {err}") from None


def _check_shape(doc: dict[str, Any]) -> None:
    """Depth, node count and JSON-only keys, walked without recursion."""
    stack: list[tuple[Any, int, str]] = [(doc, 1, "")]
    nodes = 0
    while stack:
        value, depth, where = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise DocumentRefused(f"the document has more than {MAX_NODES:,} values")
        if depth > MAX_DEPTH:
            raise DocumentRefused(f"the document nests deeper than {MAX_DEPTH} levels", where)
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise DocumentRefused(f"a key is not text: {key!r}", where or "/")
                if isinstance(item, dict | list):
                    stack.append((item, depth + 1, f"{where}/{_escape(key)}"))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict | list):
                    stack.append((item, depth + 1, f"{where}/{index}"))


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def check_references(doc: dict[str, Any]) -> None:
    """Every ``$ref`` points inside the document (``#/...``) at something that exists.

    Raises :class:`DocumentRefused` naming the reference and where it is."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str):
                if not ref.startswith("#"):
                    raise DocumentRefused(
                        f"$ref {ref!r} points outside the document; Railyard never fetches "
                        "what a document refers to: bundle it into one file first",
                        where or "/",
                    )
                _follow_chain(doc, ref, where or "/")
            for key, item in value.items():
                if isinstance(item, dict | list):
                    stack.append((item, f"{where}/{_escape(key)}"))
        elif isinstance(value, list):
            stack.extend((item, f"{where}/{i}") for i, item in enumerate(value))


_MISSING = object()
MAX_REF_CHAIN = 32


def _follow_chain(doc: dict[str, Any], ref: str, where: str) -> None:
    """A ``$ref`` resolves, and a chain of references to references ends in a value."""
    seen: list[str] = []
    while True:
        if ref in seen or len(seen) >= MAX_REF_CHAIN:
            raise DocumentRefused(
                "circular $ref: " + " -> ".join([*seen, ref]) + " never reaches a value", where
            )
        seen.append(ref)
        if not ref.startswith("#"):
            raise DocumentRefused(f"$ref {ref!r} points outside the document", where)
        target = pointer_target(doc, ref)
        if target is None:
            raise DocumentRefused(f"$ref {ref!r} does not resolve", where)
        if not (isinstance(target, dict) and isinstance(target.get("$ref"), str)):
            return
        ref = target["$ref"]


def pointer_target(doc: Any, ref: str) -> Any:
    """The value a local ``$ref`` (``#/a/b``, RFC 6901 escapes) names, or ``None``."""
    if ref in ("#", "#/"):
        return doc
    if not ref.startswith("#/"):
        return None
    node: Any = doc
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~").replace("%7B", "{").replace("%7D", "}")
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
        if node is _MISSING:
            return None
    return node


def validate_document(doc: dict[str, Any]) -> str:
    """Validate ``doc`` as OpenAPI 3.0 or 3.1 with ``openapi-spec-validator``; returns
    the version (``"3.0"`` or ``"3.1"``).

    Raises :class:`DocumentRefused` with the validator's first error and its JSON path."""
    # imported here: it takes about 0.6 s, and the curated built-ins (validated by the
    # test suite) load without it at every start
    from openapi_spec_validator import OpenAPIV30SpecValidator, OpenAPIV31SpecValidator

    version = doc.get("openapi")
    if not isinstance(version, str):
        if "swagger" in doc:
            raise DocumentRefused(
                "Swagger 2.0 documents are not imported: convert it to OpenAPI 3 first"
            )
        raise DocumentRefused("the document has no `openapi` version: is it an OpenAPI document?")
    if version.startswith("3.0."):
        validator: Any = OpenAPIV30SpecValidator(doc)
        short = "3.0"
    elif version.startswith("3.1."):
        validator = OpenAPIV31SpecValidator(doc)
        short = "3.1"
    else:
        raise DocumentRefused(f"OpenAPI {version} is not supported; 3.0.x and 3.1.x are")
    try:
        first = next(iter(validator.iter_errors()), None)
    except RecursionError:
        # openapi-spec-validator 0.9 follows a schema into its allOf/anyOf/oneOf/items/not
        # without remembering where it has been, so a cycle there (`A: {allOf: [$ref: A]}`)
        # recurses until Python's limit
        raise DocumentRefused(
            f"the OpenAPI {short} validator could not check the document: a schema contains "
            "itself through allOf, anyOf, oneOf, items or not (a cycle it cannot follow)"
        ) from None
    if first is None:
        return short
    path = "/" + "/".join(_escape(str(p)) for p in getattr(first, "absolute_path", ()))
    # the validator's message: one line saying what is wrong, then the rule and the value
    # it failed on ('"version" is a required property\n\nFailed validating ...')
    message = str(getattr(first, "message", first)).split("\n", 1)[0].strip()
    if not message or len(message) > 300:  # the first line quotes the whole value
        rule = "/".join(str(p) for p in getattr(first, "schema_path", ()))
        message = f"the value breaks the rule {rule} of the OpenAPI schema"
    raise DocumentRefused(f"not a valid OpenAPI {short} document: {message}", path)


def load_document(
    data: bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES
) -> tuple[dict[str, Any], str]:
    """:func:`parse_document`, :func:`check_references`, :func:`validate_document`:
    ``(document, "3.0" | "3.1")``. Raises :class:`DocumentRefused`."""
    doc = parse_document(data, max_bytes=max_bytes)
    check_references(doc)
    return doc, validate_document(doc)
