"""Every built-in action declares its output, and the output check itself can fail.

The per-node checks (a real run validated against the declaration) sit beside each
connector's tests: test_data_nodes.py, test_email.py, test_slack.py, test_http_more.py,
test_hubspot.py.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec
import pytest
from jsonschema import Draft202012Validator

from backend.services.connectors.node_reference import builtin_catalog
from connectors import sdk
from tests.unit.connectors.output_schema import assert_declared_output, closed

OPENAPI_MADE = {"github", "stripe", "jira", "notion", "airtable"}
"""Built-in connectors made from vendors' OpenAPI documents (connectors/builtin/saas/)."""


def test_every_builtin_action_declares_a_described_output() -> None:
    actions = [spec for spec in builtin_catalog().all() if spec.kind == "action"]
    assert len(actions) >= 16
    for spec in actions:
        schema = spec.output_schema
        if spec.connector in OPENAPI_MADE and schema.get("type") != "object":
            # the vendor's document answers a JSON array (its items are the typed fields)
            # or one of several objects (Stripe: a customer or a deleted customer)
            for shape in schema.get("anyOf") or schema.get("oneOf") or [schema]:
                fields = shape.get("properties") or shape.get("items", {}).get("properties")
                assert fields, f"{spec.type} lists no output fields"
        else:
            assert schema.get("type") == "object", f"{spec.type} declares no output object"
            assert schema.get("properties"), f"{spec.type} lists no output fields"
        assert schema.get("description"), f"{spec.type} does not describe its output"
        Draft202012Validator.check_schema(schema)


def test_closed_marks_listed_objects_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"type": "object", "properties": {"a": {}}}},
            "open": {"type": "object", "properties": {"k": {}}, "additionalProperties": True},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    out = closed(schema)
    assert out["additionalProperties"] is False
    assert out["properties"]["rows"]["items"]["additionalProperties"] is False
    assert out["properties"]["open"]["additionalProperties"] is True
    assert out["properties"]["map"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in schema  # the input is left as it was


class _Pair(TypedDict):
    """A pair."""

    left: int
    right: str


class _Config(msgspec.Struct):
    """No config keys."""


@sdk.action("test.pair", label="Pair", config=_Config)
async def _pair(config: _Config, input: Any) -> _Pair:
    return {"left": 1, "right": "r"}


@sdk.action("test.anything", label="Anything", config=_Config)
async def _anything(config: _Config, input: Any) -> Any:
    return input


def test_the_output_check_fails_on_drift() -> None:
    assert_declared_output(_pair, {"left": 1, "right": "r"})
    drifted = [
        ({"left": 1}, "'right' is a required property"),
        ({"left": "1", "right": "r"}, "$.left: '1' is not of type 'integer'"),
        ({"left": 1, "right": "r", "extra": 0}, "'extra' was unexpected"),
    ]
    for output, message in drifted:
        with pytest.raises(AssertionError) as err:
            assert_declared_output(_pair, output)
        assert message in str(err.value)
    with pytest.raises(AssertionError, match=r"test\.anything declares no output schema"):
        assert_declared_output(_anything, {"left": 1})
