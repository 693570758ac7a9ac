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

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

from backend.engine.nodes.base import NodeType, TriggerBehaviour
from backend.engine.nodes.config import config_schema, decode_config
from designer_schema.catalog import NodeTypeSpec

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


CLOUDEVENTS = "cloudevents"
"""Config key (version 2) switching the webhook to CloudEvents."""

FAILURE_ANSWER = "failure_answer"
"""Config key (version 3): ``generic`` or ``detailed`` answer to a failed run."""

INVALID_BODY = "invalid_body"
"""Config key (version 4): what a body that breaks ``body_schema`` gets."""

LATEST = 4
"""The latest version of ``trigger.webhook``."""


DEFAULT_TOLERANCE = 300
"""Seconds a signature's timestamp may be off (Slack, Stripe, timestamped generic)."""

DEFAULT_WAIT_TIMEOUT = 30.0
"""Seconds a waiting webhook waits for its answer before answering 202."""

RespondMode = Literal["immediately", "respond_node", "last_step"]
AuthKind = Literal["none", "header", "basic", "hmac"]
HmacPreset = Literal["github", "slack", "stripe", "shopify", "generic"]


def _about(title: str, description: str | None = None, **extra: Any) -> msgspec.Meta:
    """A config field's title, description and designer keywords (``x-...``)."""
    return msgspec.Meta(title=title, description=description, extra_json_schema=extra or None)


class WebhookConfig(msgspec.Struct, kw_only=True, frozen=True):
    """The config of a ``trigger.webhook`` step, every version's fields (a version's
    schema lists its own: :data:`SINCE`); decoded once per endpoint load
    (:func:`webhook_config`). Fields left unset in the designer are ``None`` and read
    through the properties below, which hold the defaults."""

    enabled: Annotated[bool, _about("Enabled")] = True
    methods: Annotated[
        str, _about("HTTP methods", "Comma-separated, e.g. POST, PUT. Others get 405.")
    ] = "POST"
    path_suffix: (
        Annotated[
            str, _about("Path suffix", "Optional readable part after the token, e.g. github/push.")
        ]
        | None
    ) = None
    max_body: (
        Annotated[
            int,
            msgspec.Meta(ge=0),
            _about(
                "Body size limit (bytes)",
                "Over it: 413 and no run. Empty: the server default (1 MiB).",
            ),
        ]
        | None
    ) = None
    auth: Annotated[
        AuthKind,
        _about(
            "Authentication",
            "Header token: a header must carry the secret; Basic auth: user + secret "
            "as password; HMAC signature: a signature of the body made with the secret.",
            **{"x-enum-labels": AUTH_KIND_LABELS},
        ),
    ] = "none"
    auth_header: (
        Annotated[str, _about("Token header", "With header authentication, e.g. X-Api-Key.")] | None
    ) = None
    basic_user: Annotated[str, _about("Basic auth user")] | None = None
    hmac_preset: Annotated[
        HmacPreset, _about("Signature scheme", **{"x-enum-labels": HMAC_PRESET_LABELS})
    ] = "github"
    hmac_header: Annotated[str, _about("Signature header (generic)", "e.g. X-Signature")] | None = (
        None
    )
    hmac_algorithm: Annotated[
        Literal["sha256", "sha1", "sha512"],
        _about(
            "Algorithm (generic)",
            **{"x-enum-labels": {"sha256": "SHA-256", "sha1": "SHA-1", "sha512": "SHA-512"}},
        ),
    ] = "sha256"
    hmac_encoding: Annotated[
        Literal["hex", "base64"],
        _about("Encoding (generic)", **{"x-enum-labels": {"hex": "Hex", "base64": "Base64"}}),
    ] = "hex"
    hmac_prefix: Annotated[str, _about("Signature prefix (generic)", "e.g. sha256=")] | None = None
    hmac_signed: Annotated[
        Literal["body", "timestamp_body"],
        _about(
            "Signed content (generic)",
            "Timestamp and body signs '<timestamp>.<body>'.",
            **{"x-enum-labels": {"body": "Body", "timestamp_body": "Timestamp and body"}},
        ),
    ] = "body"
    hmac_timestamp_header: Annotated[str, _about("Timestamp header (generic)")] | None = None
    tolerance: Annotated[
        int,
        msgspec.Meta(ge=1),
        _about(
            "Timestamp tolerance (seconds)", "Slack, Stripe and timestamped generic signatures."
        ),
    ] = DEFAULT_TOLERANCE
    respond: Annotated[
        RespondMode,
        _about(
            "Respond",
            "When the caller gets its answer: at once (202 with the run id), when a "
            "Respond to Webhook step runs, or when the run ends (with its output).",
            **{
                "x-enum-labels": RESPOND_MODE_LABELS,
                # designer_schema.ignored: every branch must pass a Respond step then
                "x-answered-by-step": ["respond_node"],
            },
        ),
    ] = "immediately"
    wait_timeout: Annotated[
        float,
        _about(
            "Wait timeout (seconds)", "When waiting: after this, answer 202 with the status URL."
        ),
    ] = DEFAULT_WAIT_TIMEOUT
    delivery_id_header: (
        Annotated[
            str,
            _about(
                "Delivery id header",
                "e.g. X-GitHub-Delivery: a repeated delivery returns the original run "
                "(as the Idempotency-Key header does).",
            ),
        ]
        | None
    ) = None
    idempotency_hours: Annotated[
        float, msgspec.Meta(ge=0), _about("Idempotency window (hours)")
    ] = DEFAULT_IDEMPOTENCY_HOURS
    rate_limit: Annotated[
        int,
        msgspec.Meta(ge=0),
        _about("Rate limit (requests per minute)", "0: unlimited. Over it: 429 with Retry-After."),
    ] = 0
    body_schema: (
        Annotated[
            dict[str, Any],
            _about(
                "Body schema",
                "JSON Schema of the request body. Expressions reading body fields are "
                "checked against it; infer it from a sample body or the last delivery.",
                **{"x-body-schema": True},
            ),
        ]
        | None
    ) = None
    redact_headers: (
        Annotated[
            str,
            _about(
                "Headers to redact",
                "Comma-separated request headers whose values runs never store, besides "
                "Authorization, Cookie, signatures and the auth header (always redacted).",
            ),
        ]
        | None
    ) = None
    cloudevents: Annotated[
        bool,
        _about(
            "CloudEvents",
            "Take CloudEvents (binary ce- headers, application/cloudevents+json or "
            "a batch): each event starts one run with the event as input, once per "
            "source and id. Other requests get 400.",
        ),
    ] = False
    failure_answer: Annotated[
        Literal["generic", "detailed"],
        _about(
            "Answer to a failed run",
            "When the caller waits (Respond step or last step) and the run fails. "
            "Detailed adds the error (kind, step, message): whoever can call the "
            "webhook reads it.",
            **{
                "x-enum-labels": {
                    "generic": "Generic (500 with the run id)",
                    "detailed": "Detailed (500 with the run's error)",
                }
            },
        ),
    ] = "generic"
    invalid_body: Annotated[
        Literal["reject", "mark_invalid"],
        _about(
            "Body breaking the body schema",
            "With a body schema: a request whose body breaks it is refused with 422 "
            "naming each field, or starts a run that fails at once with kind "
            "invalid_body (kept for inspection and replay).",
            **{
                "x-enum-labels": {
                    "reject": "Refuse it (422 naming the field; no run)",
                    "mark_invalid": "Start the run, failed as invalid_body (body kept)",
                }
            },
        ),
    ] = "reject"

    @property
    def allowed_methods(self) -> list[str]:
        """The accepted methods, upper-cased (``["POST"]`` when none is named)."""
        named = [m.strip().upper() for m in self.methods.split(",") if m.strip()]
        return named or ["POST"]

    @property
    def suffix(self) -> str:
        """The path suffix without surrounding slashes (``""``: none)."""
        return (self.path_suffix or "").strip("/")

    @property
    def token_header(self) -> str:
        """The lower-cased header carrying the token (``header`` auth)."""
        return (self.auth_header or "authorization").strip().lower()

    @property
    def signature_header(self) -> str:
        """The lower-cased header carrying a generic HMAC signature."""
        return (self.hmac_header or "x-signature").strip().lower()

    @property
    def timestamp_header(self) -> str:
        """The lower-cased header carrying a generic HMAC signature's timestamp."""
        return (self.hmac_timestamp_header or "x-timestamp").strip().lower()

    @property
    def answer_timeout(self) -> float:
        """Seconds a waiting caller waits (0 in a stored config: the default)."""
        return self.wait_timeout or DEFAULT_WAIT_TIMEOUT

    @property
    def waits(self) -> bool:
        """Whether the caller waits for the run (``respond_node`` or ``last_step``)."""
        return self.respond in ("respond_node", "last_step")


SINCE: dict[str, int] = {CLOUDEVENTS: 2, FAILURE_ANSWER: 3, INVALID_BODY: 4}
"""The version of ``trigger.webhook`` that added each later field; an earlier version's
schema leaves it out and its published steps read it as the default, whatever the
stored config says (they keep running as published)."""


def _schema(version: int) -> dict[str, Any]:
    """The config schema of ``version`` (:data:`SINCE`)."""
    later = frozenset(name for name, since in SINCE.items() if since > version)
    return config_schema(WebhookConfig, exclude=later)


def webhook_config(config: Mapping[str, Any], version: int = LATEST) -> WebhookConfig:
    """The stored ``config`` of a ``trigger.webhook`` step of ``version``, decoded (fields
    later versions added take their defaults). Raises
    :class:`~backend.engine.nodes.base.NodeError` (``invalid_config``) naming the field
    that does not fit."""
    if version < LATEST:
        config = {k: v for k, v in config.items() if SINCE.get(k, 1) <= version}
    return decode_config(WebhookConfig, config)


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
    config_schema=_schema(1),
)


class Webhook(TriggerBehaviour):
    """Its step completes with the run input; its config is a :class:`WebhookConfig`
    (an earlier version's step reads only that version's fields: :func:`webhook_config`)."""

    config_type = WebhookConfig


NODE = NodeType(SPEC, Webhook())

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
    config_schema=_schema(2),
)

NODE_V2 = NodeType(SPEC_V2, Webhook())

SPEC_V3 = msgspec.structs.replace(
    SPEC_V2,
    version=3,
    config_schema=_schema(3),
)

NODE_V3 = NodeType(SPEC_V3, Webhook())

BODY_ERRORS = "body_errors"
"""Run input key (version 4, ``mark_invalid``): how the body breaks ``body_schema``, a
list of ``{"field", "message"}`` set by the webhook endpoint (backend.triggers.body_schema),
never by the caller (it is beside the body, not in it)."""

SPEC_V4 = msgspec.structs.replace(
    SPEC_V3,
    version=4,
    config_schema=_schema(4),
)


class WebhookV4(Webhook):
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
