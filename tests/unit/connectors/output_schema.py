"""Check an action's real output against the output schema it declares.

The designer reads a declared object schema that lists ``properties`` as *closed*
(designer_schema/schema_paths.py): a path to an unlisted property is an error. So the check
closes every such object (``additionalProperties: false`` unless the schema says
otherwise) before validating with JSON Schema draft 2020-12, the dialect msgspec emits: an
output key the declaration does not list fails, as does a listed key of the wrong type or a
missing required one.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from connectors.sdk import ActionDefinition


def closed(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on each object schema that lists
    ``properties`` and says nothing about other properties (recursively)."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: closed(value) for key, value in schema.items()}
    if isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema:
        out["additionalProperties"] = False
    return out


def assert_declared_output(action: ActionDefinition, output: Any) -> None:
    """Fail unless ``action`` declares an output schema and ``output`` satisfies it
    (closed as above); the message lists every violation with its JSON path."""
    schema = action.output_json_schema()
    assert schema, f"{action.type} declares no output schema"
    Draft202012Validator.check_schema(schema)
    errors = sorted(
        Draft202012Validator(closed(schema)).iter_errors(output), key=lambda e: e.json_path
    )
    assert not errors, f"{action.type} output does not match its declared schema: " + "; ".join(
        f"{e.json_path}: {e.message}" for e in errors
    )
