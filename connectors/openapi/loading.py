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
  3.1) rejects; Swagger 2.0 and other versions; a schema under an ``allOf`` that contains
  itself through ``allOf``, ``anyOf``, ``oneOf``, ``items`` or ``not``, which the
  validator cannot check (:func:`composition_cycle`, found before it runs).

Time and memory are bounded by the byte cap: the parse and every walk are linear in the
document's size, and no reference is ever expanded here (see :mod:`connectors.openapi.refs`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
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
    for value, where in _objects(doc):
        ref = value.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#"):
                raise DocumentRefused(
                    f"$ref {ref!r} points outside the document; Railyard never fetches "
                    "what a document refers to: bundle it into one file first",
                    where or "/",
                )
            _follow_chain(doc, ref, where or "/")


def _objects(doc: Any) -> Iterator[tuple[dict[str, Any], str]]:
    """Every object (dict) in ``doc`` with its JSON pointer (``""`` for ``doc`` itself),
    depth first, without recursion."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            yield value, where
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
    cycle = _CYCLE_REASON.format(short=short)
    where = composition_cycle(doc)
    if where is not None:
        raise DocumentRefused(cycle, where)
    try:
        first = next(iter(validator.iter_errors()), None)
    except RecursionError:  # a cycle composition_cycle did not foresee: still refused
        raise DocumentRefused(cycle) from None
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


_CYCLE_REASON = (
    "the OpenAPI {short} validator could not check the document: a schema contains "
    "itself through allOf, anyOf, oneOf, items or not (a cycle it cannot follow)"
)
_ENTERED = ("allOf", "anyOf", "oneOf", "items", "not")


def composition_cycle(doc: dict[str, Any]) -> str | None:
    """Where (the JSON pointer of an ``allOf``) the validator would recurse without end, or
    ``None``.

    openapi-spec-validator 0.9 collects the properties of each ``allOf`` member by
    following its ``allOf``, ``anyOf``, ``oneOf``, ``items`` and ``not`` (references
    resolved) without remembering where it has been
    (``SchemaValidator._collect_properties``), so a member from which those keywords lead
    back to a schema already on the way (``A: {allOf: [$ref: A]}``, or ``A: {anyOf:
    [{items: $ref: A}]}`` under an ``allOf``) recurses until Python's limit: at the
    interpreter's limit of 10,000 frames, half a minute of a core. One depth-first walk over
    those keywords finds such a cycle first, in time linear in the document (each schema
    is finished once). Needs :func:`check_references` to have passed (every reference
    resolves, no chain is circular). A recursive schema through ``properties`` (a tree
    node's ``children``) is no such cycle."""
    finished: set[int] = set()
    for value, where in _objects(doc):
        members = value.get("allOf")
        if isinstance(members, list):
            for member in members:
                if _reaches_cycle(doc, _resolved(doc, member), finished):
                    return f"{where}/allOf"
    return None


def _resolved(doc: dict[str, Any], value: Any) -> Any:
    """``value`` with its chain of ``$ref`` followed to the value it ends in."""
    for _ in range(MAX_REF_CHAIN):
        if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
            break
        value = pointer_target(doc, value["$ref"])
    return value


def _entered(doc: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schemas the validator's property collection enters from ``schema``."""
    found: list[Any] = []
    for keyword in _ENTERED:
        inner = schema.get(keyword)
        found += inner if isinstance(inner, list) else [inner]
    return [s for s in (_resolved(doc, item) for item in found) if isinstance(s, dict)]


def _reaches_cycle(doc: dict[str, Any], start: Any, finished: set[int]) -> bool:
    """True when a schema on a path of :data:`_ENTERED` keywords from ``start`` is reached
    again on that path; ``finished`` holds the schemas (by ``id``) known to reach none."""
    if not isinstance(start, dict) or id(start) in finished:
        return False
    path = {id(start)}
    stack = [(start, iter(_entered(doc, start)))]
    while stack:
        schema, inner = stack[-1]
        nxt = next(inner, None)
        if nxt is None:
            stack.pop()
            path.discard(id(schema))
            finished.add(id(schema))
        elif id(nxt) in path:
            return True
        elif id(nxt) not in finished:
            path.add(id(nxt))
            stack.append((nxt, iter(_entered(doc, nxt))))
    return False


def load_document(
    data: bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES
) -> tuple[dict[str, Any], str]:
    """:func:`parse_document`, :func:`check_references`, :func:`validate_document`:
    ``(document, "3.0" | "3.1")``. Raises :class:`DocumentRefused`."""
    doc = parse_document(data, max_bytes=max_bytes)
    check_references(doc)
    return doc, validate_document(doc)
