"""``control.respond``: sets the HTTP response of a webhook trigger that waits for it.

``status`` (an HTTP status code, default 200), ``headers`` (object) and ``body`` (default:
the step input) become the run's webhook response and the step's output
``{"status", "headers", "body"}``.
"""

from __future__ import annotations

from typing import Any

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeError, NodeType
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

SPEC = NodeTypeSpec(
    type="control.respond",
    label="Respond to Webhook",
    kind="control",
    category="Flow",
    icon="reply",
    description="Sets the HTTP response of a webhook trigger that waits for it.",
    config_schema={
        "type": "object",
        "properties": {
            "status": {"type": "integer", "default": 200, "title": "Status code"},
            "headers": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "title": "Headers",
            },
            "body": {
                "title": "Body",
                "description": "JSON value or =expression; empty sends the step input",
            },
        },
        # designer_schema.ignored: without a Webhook that waits for it, nothing is answered
        "x-requires-trigger": {
            "type": "trigger.webhook",
            "config": {"respond": ["respond_node"]},
        },
    },
    expression_fields=("status", "headers", "body"),
    output_schema={
        "type": "object",
        "properties": {
            "status": {"type": "integer"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {},
        },
        "required": ["status", "headers", "body"],
    },
)


class Respond(InlineBehaviour):
    """Records the webhook response on the run."""

    def evaluate(self, step: Step, config: dict[str, Any], data: Any) -> InlineResult:
        status = config.get("status", 200)
        if status is None:
            status = 200
        if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
            raise NodeError(f"status must be an HTTP status code, got {status!r}", field="status")
        headers = config.get("headers") or {}
        if not isinstance(headers, dict):
            raise NodeError("headers must be an object", field="headers")
        response = {
            "status": status,
            "headers": {str(k): str(v) for k, v in headers.items()},
            "body": config["body"] if "body" in config else data,
        }
        return InlineResult(response, ("out",), response)


NODE = NodeType(SPEC, Respond())
