"""``control.respond``: sets the HTTP response of a webhook trigger that waits for it.

``status`` (an HTTP status code, default 200), ``headers`` (object) and ``body`` (default:
the step input) become the run's webhook response and the step's output
``{"status", "headers", "body"}``. A literal ``null`` is an unset field (the compiler's
rule): only a ``body`` expression whose value is ``null`` answers ``null``.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from backend.engine.nodes.base import InlineBehaviour, InlineResult, NodeType
from backend.engine.nodes.config import config_schema
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

DEFAULT_STATUS = 200


class RespondConfig(msgspec.Struct, kw_only=True, frozen=True):
    """``status`` (100-599; ``None``: 200), ``headers`` (name -> value, sent as text;
    ``None``: none) and ``body`` (any JSON value; unset: the step input)."""

    status: (
        Annotated[
            int,
            msgspec.Meta(
                ge=100, le=599, title="Status code", extra_json_schema={"default": DEFAULT_STATUS}
            ),
        ]
        | None
    ) = None
    headers: (
        Annotated[
            dict[str, Any],
            msgspec.Meta(
                title="Headers", extra_json_schema={"additionalProperties": {"type": "string"}}
            ),
        ]
        | None
    ) = None
    body: (
        Annotated[
            Any,
            msgspec.Meta(
                title="Body", description="JSON value or =expression; empty sends the step input"
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


_SCHEMA = config_schema(RespondConfig)

SPEC = NodeTypeSpec(
    type="control.respond",
    label="Respond to Webhook",
    kind="control",
    category="Flow",
    icon="reply",
    description="Sets the HTTP response of a webhook trigger that waits for it.",
    config_schema={
        **_SCHEMA,
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

    config_type = RespondConfig

    def evaluate(self, step: Step, config: RespondConfig, data: Any) -> InlineResult:
        response = {
            "status": DEFAULT_STATUS if config.status is None else config.status,
            "headers": {str(k): str(v) for k, v in (config.headers or {}).items()},
            "body": data if config.body is msgspec.UNSET else config.body,
        }
        return InlineResult(response, ("out",), response)


NODE = NodeType(SPEC, Respond())
