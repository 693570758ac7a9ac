"""What each published version of the ``trigger.webhook`` node does with a delivery.

A published version keeps the behaviour it was published with (docs/webhooks.md,
"Versions"): CloudEvents from version 2, the detailed failure answer as a choice from
version 3, the body schema checked at the door from version 4. The published trigger
step (``{"type", "type_version", "config", ...}``; graphs from before node-type versions
have no ``type_version`` and count as version 1) is decoded once into a
:class:`~backend.engine.nodes.trigger_webhook.WebhookConfig` in which the fields of later
versions keep their defaults (:func:`~backend.engine.nodes.trigger_webhook.webhook_config`).
Pure. A draft (the designer's test URL, test runs) is what its next publish would be: the
node's newest version (:func:`draft_step`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.engine.nodes import BUILTIN_NODES
from backend.engine.nodes.base import NodeError
from backend.engine.nodes.trigger_webhook import WebhookConfig, webhook_config

__all__ = [
    "WEBHOOK_TRIGGER",
    "draft_config",
    "draft_step",
    "invalid_body_mode",
    "published_config",
    "step_version",
]

WEBHOOK_TRIGGER = "trigger.webhook"
NEWEST_VERSION = max(n.spec.version for n in BUILTIN_NODES if n.spec.type == WEBHOOK_TRIGGER)
"""The version a draft's webhook trigger compiles to, and so publishes as."""


def draft_step(node_type: str) -> dict[str, Any]:
    """A draft's trigger node of type ``node_type`` as the published step it would become
    (for :func:`invalid_body_mode`): the newest version of ``trigger.webhook``."""
    return {"type": node_type, "type_version": NEWEST_VERSION}


def step_version(step: Mapping[str, Any]) -> int:
    """The node-type version a published step pins (1 for graphs from before versions)."""
    return int(step.get("type_version") or 1)


def published_config(step: Mapping[str, Any]) -> WebhookConfig:
    """The config a published trigger step is served with: a ``trigger.webhook`` step's
    own, decoded for its version; a connector's webhook trigger gets the defaults (its
    own config is the connector's, see backend.services.triggers.webhooks.WEBHOOK_TYPES).

    Raises :class:`~backend.engine.nodes.base.NodeError` (``invalid_config``) naming the
    field that does not fit."""
    if step.get("type") != WEBHOOK_TRIGGER:
        return WebhookConfig()
    return webhook_config(step.get("config") or {}, step_version(step))


def draft_config(config: Mapping[str, Any]) -> tuple[WebhookConfig, NodeError | None]:
    """A draft's webhook config (being edited, never checked) and the first problem found:
    each field that does not fit is left at its default, so the rest (path suffix,
    methods) still holds."""
    given = dict(config)
    first: NodeError | None = None
    while True:
        try:
            return webhook_config(given), first
        except NodeError as exc:
            first = first or exc
            name = (exc.field or "").split(".")[0].split("[")[0]
            if name not in given:
                return WebhookConfig(), first
            del given[name]


def invalid_body_mode(step: Mapping[str, Any], config: WebhookConfig) -> str | None:
    """What a published trigger step does with a body breaking its ``body_schema``:
    ``trigger.webhook`` version 4 or later with a body schema ``reject`` (the default) or
    ``mark_invalid``; ``None`` (not checked) for earlier versions, which keep running as
    published, and without a schema."""
    if step.get("type") != WEBHOOK_TRIGGER or step_version(step) < 4:
        return None
    return config.invalid_body if config.body_schema else None
