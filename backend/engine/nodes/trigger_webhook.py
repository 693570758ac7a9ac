"""``trigger.webhook``: an HTTP request to ``/hooks/<token>[/<path_suffix>]`` starts a run.

Version 2 adds ``cloudevents``: the webhook takes CloudEvents (binary, structured and
batched modes), each event starts one run whose input is the event, deduplicated by its
``source`` and ``id`` (backend.triggers.cloudevents). Without it version 2 behaves as
version 1, which graphs published before it keep running.

Version 4 adds ``invalid_body``: a body that breaks ``body_schema`` is refused with 422
naming the field (``reject``, the default) or starts a run that fails at its trigger step
with kind ``invalid_body`` (``mark_invalid``); versions 1-3 do not check the body
(docs/webhooks.md, "Body schema").

Version 3 adds ``failure_answer``: what a waiting webhook's caller learns when the run
fails. Every version answers ``generic`` (500 with the run id and status, no error);
only version 3's explicit ``detailed`` adds the run's error (kind, step, message), which
anyone who can call the webhook then reads (docs/webhooks.md, "Response modes").

Config: accepted ``methods``, ``path_suffix``, ``enabled``, ``max_body`` (bytes), ``auth``
(none, header token, basic, HMAC with presets), ``respond`` mode, ``delivery_id_header`` and
``idempotency_hours``, ``rate_limit`` (requests per minute), ``redact_headers`` (extra secret
header names, backend.triggers.redaction). The secret (token, password or HMAC key) is
write-only and stored encrypted outside the config (see docs/webhooks.md).
The run input shape is documented in ``backend.triggers.webhook_input``; the config lives
in the published version's graph, so the endpoint always follows the active version.
"""

from __future__ import annotations

from typing import Any

import msgspec

from backend.engine.nodes.base import NodeType, TriggerBehaviour
from designer_schema.catalog import NodeTypeSpec

RESPOND_MODES = ["immediately", "respond_node", "last_step"]
AUTH_KINDS = ["none", "header", "basic", "hmac"]
HMAC_PRESETS = ["github", "slack", "stripe", "shopify", "generic"]
#: What the designer shows for each enum value (``x-enum-labels``, see frontend/forms.py).
RESPOND_MODE_LABELS = {
    "immediately": "Immediately (202 with the run id)",
    "respond_node": "When a Respond to Webhook step answers",
    "last_step": "When the run ends, with its output",
}
AUTH_KIND_LABELS = {
    "none": "None",
    "header": "Header token",
    "basic": "Basic auth",
    "hmac": "HMAC signature",
}
HMAC_PRESET_LABELS = {
    "github": "GitHub",
    "slack": "Slack",
    "stripe": "Stripe",
    "shopify": "Shopify",
    "generic": "Generic (configure below)",
}
DEFAULT_MAX_BODY = 1024 * 1024
DEFAULT_IDEMPOTENCY_HOURS = 24.0

OUTPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "method": {"type": "string"},
        "path": {"type": "string"},
        "query": {
            "type": "object",
            "additionalProperties": {"type": ["string", "array"]},
            "description": "Repeated keys become lists",
        },
        "headers": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "Names lower-cased",
        },
        "auth": {
            "type": "object",
            "description": "How the request was authenticated (backend.triggers.redaction)",
            "properties": {
                "kind": {"type": "string"},
                "verified": {"type": "boolean"},
                "scheme": {"type": "string"},
                "user": {"type": "string"},
                "header": {"type": "string"},
            },
            "required": ["kind", "verified"],
        },
        "body": {"description": "Parsed by media type: JSON value, form object, text or null"},
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    name: {"type": "integer" if name == "size" else "string"}
                    for name in ("field", "filename", "content_type", "size", "sha256", "ref")
                },
            },
        },
    },
    "required": ["method", "path", "query", "headers", "auth", "body", "files"],
    "x-property-schemas": {"body": "body_schema"},
}
"""The run input a webhook request makes (backend.triggers.webhook_input)."""

SPEC = NodeTypeSpec(
    type="trigger.webhook",
    label="Webhook",
    kind="trigger",
    category="Triggers",
    icon="webhook",
    description=(
        "Starts a run when an HTTP request reaches the workflow's webhook URL. The run input "
        "is {method, path, query, headers, auth, body, files}."
    ),
    inputs=(),
    outputs=("out",),
    output_schema=OUTPUT_SCHEMA,
    config_schema={
        "type": "object",
        "properties": {
            "enabled": {"type": "boolean", "default": True, "title": "Enabled"},
            "methods": {
                "type": "string",
                "default": "POST",
                "title": "HTTP methods",
                "description": "Comma-separated, e.g. POST, PUT. Others get 405.",
            },
            "path_suffix": {
                "type": "string",
                "title": "Path suffix",
                "description": "Optional readable part after the token, e.g. github/push.",
            },
            "max_body": {
                "type": "integer",
                "minimum": 0,
                "title": "Body size limit (bytes)",
                "description": "Over it: 413 and no run. Empty: the server default (1 MiB).",
            },
            "auth": {
                "type": "string",
                "enum": AUTH_KINDS,
                "x-enum-labels": AUTH_KIND_LABELS,
                "default": "none",
                "title": "Authentication",
                "description": (
                    "Header token: a header must carry the secret; Basic auth: user + secret "
                    "as password; HMAC signature: a signature of the body made with the secret."
                ),
            },
            "auth_header": {
                "type": "string",
                "title": "Token header",
                "description": "With header authentication, e.g. X-Api-Key.",
            },
            "basic_user": {"type": "string", "title": "Basic auth user"},
            "hmac_preset": {
                "type": "string",
                "enum": HMAC_PRESETS,
                "x-enum-labels": HMAC_PRESET_LABELS,
                "default": "github",
                "title": "Signature scheme",
            },
            "hmac_header": {
                "type": "string",
                "title": "Signature header (generic)",
                "description": "e.g. X-Signature",
            },
            "hmac_algorithm": {
                "type": "string",
                "enum": ["sha256", "sha1", "sha512"],
                "x-enum-labels": {"sha256": "SHA-256", "sha1": "SHA-1", "sha512": "SHA-512"},
                "default": "sha256",
                "title": "Algorithm (generic)",
            },
            "hmac_encoding": {
                "type": "string",
                "enum": ["hex", "base64"],
                "x-enum-labels": {"hex": "Hex", "base64": "Base64"},
                "default": "hex",
                "title": "Encoding (generic)",
            },
            "hmac_prefix": {
                "type": "string",
                "title": "Signature prefix (generic)",
                "description": "e.g. sha256=",
            },
            "hmac_signed": {
                "type": "string",
                "enum": ["body", "timestamp_body"],
                "x-enum-labels": {"body": "Body", "timestamp_body": "Timestamp and body"},
                "default": "body",
                "title": "Signed content (generic)",
                "description": "Timestamp and body signs '<timestamp>.<body>'.",
            },
            "hmac_timestamp_header": {
                "type": "string",
                "title": "Timestamp header (generic)",
            },
            "tolerance": {
                "type": "integer",
                "minimum": 1,
                "default": 300,
                "title": "Timestamp tolerance (seconds)",
                "description": "Slack, Stripe and timestamped generic signatures.",
            },
            "respond": {
                "type": "string",
                "enum": RESPOND_MODES,
                "x-enum-labels": RESPOND_MODE_LABELS,
                # designer_schema.ignored: every branch must pass a Respond step then
                "x-answered-by-step": ["respond_node"],
                "default": "immediately",
                "title": "Respond",
                "description": (
                    "When the caller gets its answer: at once (202 with the run id), when a "
                    "Respond to Webhook step runs, or when the run ends (with its output)."
                ),
            },
            "wait_timeout": {
                "type": "number",
                "default": 30,
                "title": "Wait timeout (seconds)",
                "description": "When waiting: after this, answer 202 with the status URL.",
            },
            "delivery_id_header": {
                "type": "string",
                "title": "Delivery id header",
                "description": (
                    "e.g. X-GitHub-Delivery: a repeated delivery returns the original run "
                    "(as the Idempotency-Key header does)."
                ),
            },
            "idempotency_hours": {
                "type": "number",
                "minimum": 0,
                "default": DEFAULT_IDEMPOTENCY_HOURS,
                "title": "Idempotency window (hours)",
            },
            "rate_limit": {
                "type": "integer",
                "minimum": 0,
                "default": 0,
                "title": "Rate limit (requests per minute)",
                "description": "0: unlimited. Over it: 429 with Retry-After.",
            },
            "body_schema": {
                "type": "object",
                "title": "Body schema",
                "x-body-schema": True,
                "description": (
                    "JSON Schema of the request body. Expressions reading body fields are "
                    "checked against it; infer it from a sample body or the last delivery."
                ),
            },
            "redact_headers": {
                "type": "string",
                "title": "Headers to redact",
                "description": (
                    "Comma-separated request headers whose values runs never store, besides "
                    "Authorization, Cookie, signatures and the auth header (always redacted)."
                ),
            },
        },
    },
)

NODE = NodeType(SPEC, TriggerBehaviour())

CLOUDEVENTS = "cloudevents"
"""Config key (version 2) switching the webhook to CloudEvents."""

_STRING_OR_NULL: dict[str, object] = {"type": ["string", "null"]}

CLOUDEVENT_PROPERTIES: dict[str, object] = {
    "specversion": {"type": "string", "description": "1.0 (or 0.3)"},
    "id": {"type": "string"},
    "source": {"type": "string", "description": "A URI reference naming the producer"},
    "type": {"type": "string", "description": "e.g. com.example.order.created"},
    "subject": _STRING_OR_NULL,
    "time": {**_STRING_OR_NULL, "description": "RFC 3339, as the sender wrote it"},
    "datacontenttype": _STRING_OR_NULL,
    "dataschema": _STRING_OR_NULL,
    "extensions": {
        "type": "object",
        "description": "Every other attribute, e.g. traceparent",
        "additionalProperties": True,
    },
    "data": {"description": "The event data: a JSON value, text, or {$base64, ...}"},
}
"""The run input of a CloudEvent (backend.triggers.cloudevents)."""

_PROPERTIES = dict(OUTPUT_SCHEMA["properties"])  # type: ignore[call-overload]

OUTPUT_SCHEMA_V2: dict[str, object] = {
    "type": "object",
    "properties": {**_PROPERTIES, **CLOUDEVENT_PROPERTIES},
    "required": list(OUTPUT_SCHEMA["required"]),  # type: ignore[call-overload]
    "x-property-schemas": {"body": "body_schema", "data": "body_schema"},
    "x-properties-if": {
        **{name: f"!{CLOUDEVENTS}" for name in _PROPERTIES},
        **{name: CLOUDEVENTS for name in CLOUDEVENT_PROPERTIES},
    },
}
"""Version 2's run input: the request's (as version 1), or with ``cloudevents`` the
event's."""

SPEC_V2 = msgspec.structs.replace(
    SPEC,
    version=2,
    description=(
        "Starts a run when an HTTP request reaches the workflow's webhook URL. The run input "
        "is {method, path, query, headers, auth, body, files}; with CloudEvents, each event "
        "(binary, structured or batched) starts a run with the event as input."
    ),
    output_schema=OUTPUT_SCHEMA_V2,
    config_schema={
        **SPEC.config_schema,
        "properties": {
            **SPEC.config_schema["properties"],
            CLOUDEVENTS: {
                "type": "boolean",
                "default": False,
                "title": "CloudEvents",
                "description": (
                    "Take CloudEvents (binary ce- headers, application/cloudevents+json or "
                    "a batch): each event starts one run with the event as input, once per "
                    "source and id. Other requests get 400."
                ),
            },
        },
    },
)

NODE_V2 = NodeType(SPEC_V2, TriggerBehaviour())

FAILURE_ANSWER = "failure_answer"
"""Config key (version 3): ``generic`` or ``detailed`` answer to a failed run."""
FAILURE_ANSWERS = ["generic", "detailed"]

SPEC_V3 = msgspec.structs.replace(
    SPEC_V2,
    version=3,
    config_schema={
        **SPEC_V2.config_schema,
        "properties": {
            **SPEC_V2.config_schema["properties"],
            FAILURE_ANSWER: {
                "type": "string",
                "enum": FAILURE_ANSWERS,
                "x-enum-labels": {
                    "generic": "Generic (500 with the run id)",
                    "detailed": "Detailed (500 with the run's error)",
                },
                "default": "generic",
                "title": "Answer to a failed run",
                "description": (
                    "When the caller waits (Respond step or last step) and the run fails. "
                    "Detailed adds the error (kind, step, message): whoever can call the "
                    "webhook reads it."
                ),
            },
        },
    },
)

NODE_V3 = NodeType(SPEC_V3, TriggerBehaviour())

INVALID_BODY = "invalid_body"
"""Config key (version 4): what a body that breaks ``body_schema`` gets."""
INVALID_BODY_MODES = ["reject", "mark_invalid"]
BODY_ERRORS = "body_errors"
"""Run input key (version 4, ``mark_invalid``): how the body breaks ``body_schema``, a
list of ``{"field", "message"}`` set by the webhook endpoint (backend.triggers.body_schema),
never by the caller (it is beside the body, not in it)."""

SPEC_V4 = msgspec.structs.replace(
    SPEC_V3,
    version=4,
    config_schema={
        **SPEC_V3.config_schema,
        "properties": {
            **SPEC_V3.config_schema["properties"],
            INVALID_BODY: {
                "type": "string",
                "enum": INVALID_BODY_MODES,
                "x-enum-labels": {
                    "reject": "Refuse it (422 naming the field; no run)",
                    "mark_invalid": "Start the run, failed as invalid_body (body kept)",
                },
                "default": "reject",
                "title": "Body breaking the body schema",
                "description": (
                    "With a body schema: a request whose body breaks it is refused with 422 "
                    "naming each field, or starts a run that fails at once with kind "
                    "invalid_body (kept for inspection and replay)."
                ),
            },
        },
    },
)


class WebhookV4(TriggerBehaviour):
    """Version 4: a run whose input carries :data:`BODY_ERRORS` (the endpoint found the
    body breaking the body schema, mode ``mark_invalid``) fails at its trigger step with
    kind ``invalid_body``, naming the first field and listing them all."""

    def problem(self, config: dict[str, Any], run_input: Any) -> dict[str, Any] | None:
        errors = run_input.get(BODY_ERRORS) if isinstance(run_input, dict) else None
        if not errors or not isinstance(errors, list):
            return None
        first = errors[0] if isinstance(errors[0], dict) else {}
        return {
            "message": f"the body breaks the body schema: {first.get('message', '')}".strip(),
            "kind": "invalid_body",
            "field": first.get("field"),
            "errors": errors,
        }


NODE_V4 = NodeType(SPEC_V4, WebhookV4())
