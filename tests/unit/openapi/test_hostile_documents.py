"""Malformed and hostile documents are refused with a clear message, in bounded time and
memory: nothing is expanded, fetched or walked without a limit."""

from __future__ import annotations

import json

import pytest

from connectors.openapi.importer import build_definition
from connectors.openapi.loading import DocumentRefused, load_document

PATHS = {
    "/items": {
        "get": {
            "operationId": "listItems",
            "responses": {
                "200": {
                    "description": "ok",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                    },
                }
            },
        }
    }
}


def _doc(**extra: object) -> dict:  # type: ignore[type-arg]
    return {"openapi": "3.0.3", "info": {"title": "T", "version": "1"}, "paths": PATHS, **extra}


def _refused(data: bytes, **kwargs: int) -> DocumentRefused:
    with pytest.raises(DocumentRefused) as caught:
        load_document(data, **kwargs)
    return caught.value


def test_billion_laughs_yaml_is_refused_at_the_first_anchor() -> None:
    lines = ['openapi: "3.0.3"', 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for n in range(1, 10):
        refs = ",".join([f"*{chr(96 + n)}"] * 9)
        lines.append(f"{chr(97 + n)}: &{chr(97 + n)} [{refs}]")
    error = _refused("\n".join(lines).encode())
    assert "YAML anchor &a is not accepted" in error.reason
    assert error.where == "line 2, column 4"


def test_a_huge_document_is_refused_before_parsing() -> None:
    error = _refused(b"{" + b" " * 2000 + b"}", max_bytes=1000)
    assert error.reason == "the document has 2,002 bytes; at most 1,000 are accepted"


def test_deep_nesting_is_refused() -> None:
    error = _refused(b"[" * 100_000 + b"]" * 100_000)
    assert "nests deeper than 64 levels" in error.reason


def test_remote_references_are_never_fetched() -> None:
    doc = _doc(components={"schemas": {"Node": {"$ref": "https://example.com/x.json#/Node"}}})
    error = _refused(json.dumps(doc).encode())
    assert "points outside the document" in error.reason
    assert error.where == "/components/schemas/Node"


def test_a_reference_cycle_without_a_value_is_refused() -> None:
    schemas = {
        "Node": {"$ref": "#/components/schemas/Other"},
        "Other": {"$ref": "#/components/schemas/Node"},
    }
    error = _refused(json.dumps(_doc(components={"schemas": schemas})).encode())
    assert error.reason.startswith("circular $ref: #/components/schemas/")


def test_recursive_schemas_are_cut_not_expanded() -> None:
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
            "parent": {"$ref": "#/components/schemas/Node"},
        },
    }
    doc, version = load_document(json.dumps(_doc(components={"schemas": {"Node": node}})).encode())
    definition = build_definition(doc, name="t", openapi_version=version)
    output = definition.operations[0].output_schema
    assert output["properties"]["parent"] == {"description": "Node (recursive)"}
    assert output["properties"]["children"]["items"] == {"description": "Node (recursive)"}


def test_swagger_2_and_other_versions_are_refused() -> None:
    error = _refused(b'{"swagger": "2.0", "info": {}, "paths": {}}')
    assert error.reason.startswith("Swagger 2.0 documents are not imported")
    error = _refused(b'{"openapi": "4.0.0", "info": {}, "paths": {}}')
    assert error.reason == "OpenAPI 4.0.0 is not supported; 3.0.x and 3.1.x are"


def test_not_json_nor_yaml_nor_an_object() -> None:
    assert "neither JSON nor valid YAML" in _refused(b"a: [unclosed").reason
    assert _refused(b"- 1\n- 2\n").reason == "an OpenAPI document is an object at its top level"
    assert "not valid JSON" in _refused(b'{"openapi": }').reason


def test_yaml_in_flow_style_is_read_and_broken_json_keeps_its_json_error() -> None:
    flow = b'{openapi: 3.0.3, info: {title: Flow, version: "1"}, paths: {}}'
    assert load_document(flow) == (
        {"openapi": "3.0.3", "info": {"title": "Flow", "version": "1"}, "paths": {}},
        "3.0",
    )
    assert "neither JSON nor valid YAML" in _refused(b"{{{ not yaml: [").reason
    assert _refused(b"{a: &x 1, b: *x}").reason.startswith("YAML anchor &x is not accepted")
    assert "not valid JSON" in _refused(b'{ "openapi": "3.0.3", }').reason


def test_validator_error_says_what_is_wrong() -> None:
    error = _refused(b"openapi: 3.0.3\ninfo: {title: No version}\npaths: {}\n")
    assert error.reason == 'not a valid OpenAPI 3.0 document: "version" is a required property'
    assert error.where == "/info"


def test_a_schema_that_contains_itself_through_all_of_is_refused_not_a_crash() -> None:
    schema = {"$ref": "#/components/schemas/A"}
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": schema}}}}
    doc = {
        "openapi": "3.0.3",
        "info": {"title": "Cycle", "version": "1"},
        "paths": {"/x": {"get": {"responses": ok}}},
        "components": {"schemas": {"A": {"allOf": [schema, {"type": "object"}]}}},
    }
    error = _refused(json.dumps(doc).encode())
    assert error.reason.startswith("the OpenAPI 3.0 validator could not check the document")
    assert "contains itself through allOf" in error.reason
    assert error.where == "/components/schemas/A/allOf"


def test_a_cycle_through_any_of_and_items_under_an_all_of_is_refused_before_validating(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the validator would recurse to Python's limit (half a minute of a core): found first
    import openapi_spec_validator

    class Never:
        def __init__(self, _doc: object) -> None:
            pass

        def iter_errors(self) -> None:
            raise AssertionError("the validator ran")

    monkeypatch.setattr(openapi_spec_validator, "OpenAPIV31SpecValidator", Never)
    value = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#/$defs/V"}}]}
    wrapped = {"allOf": [{"$ref": "#/components/schemas/Value"}, {"type": "object"}]}
    doc = _doc(
        openapi="3.1.0", components={"schemas": {"Value": value, "Wrapped": wrapped, "Node": {}}}
    )
    doc["$defs"] = {"V": {"$ref": "#/components/schemas/Value"}}
    error = _refused(json.dumps(doc).encode())
    assert "contains itself through allOf, anyOf, oneOf, items or not" in error.reason
    assert error.where == "/components/schemas/Wrapped/allOf"


def test_recursion_the_validator_follows_is_accepted() -> None:
    # a JSON-like value (anyOf -> items -> itself) outside any allOf, and an allOf whose
    # member recurses only through properties (a tree): the validator checks both
    value = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"$ref": "#/components/schemas/Value"}},
        ]
    }
    node = {
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}},
    }
    both = {"allOf": [{"$ref": "#/components/schemas/Node"}, {"$ref": "#/components/schemas/Node"}]}
    schemas = {"Value": value, "Node": node, "Both": both}
    _doc_read, version = load_document(json.dumps(_doc(components={"schemas": schemas})).encode())
    assert version == "3.0"
