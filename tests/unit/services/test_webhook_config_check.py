"""The diagram check that refuses a Webhook trigger config its endpoint could not serve
(backend/services/workflows/diagram_checks.py): publishing it answers 422 instead of a delivery
answering 503 later."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from backend.services.workflows.diagram_checks import trigger_diagnostics, webhook_config_diagnostic
from designer_schema.diagram import Diagram
from tests.diagrams import diagram, node


class _Catalog:
    triggers: dict[str, Any] = {}

    def get(self, node_type: str) -> None:
        return None


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"tolerance": 0}, "tolerance"),
        ({"max_body": -1}, "max_body"),
        ({"rate_limit": "many"}, "rate_limit"),
        ({"respond": "later"}, "respond"),
        ({"idempotency_hours": -0.5}, "idempotency_hours"),
    ],
)
def test_a_webhook_config_that_does_not_decode_is_an_invalid_config_error(
    config: dict[str, Any], field: str
) -> None:
    d = msgspec.convert(diagram([node("hook", "trigger.webhook", **config)], []), Diagram)
    [found] = trigger_diagnostics(d, _Catalog())  # type: ignore[arg-type]
    assert (found.severity, found.code, found.node_id, found.field) == (
        "error",
        "invalid_config",
        "hook",
        field,
    )
    assert f"invalid config: {field}: " in found.message


def test_a_webhook_config_that_decodes_passes() -> None:
    for config in ({}, {"tolerance": 1, "max_body": 0, "rate_limit": "3", "auth": None}):
        assert webhook_config_diagnostic("hook", config) is None
    assert webhook_config_diagnostic("hook", "not a dict") is None
