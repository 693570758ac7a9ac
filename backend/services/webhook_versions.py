"""What each published version of the ``trigger.webhook`` node does with a delivery.

A published version keeps the behaviour it was published with (docs/webhooks.md,
"Versions"): CloudEvents from version 2, the detailed failure answer as a choice from
version 3, the body schema checked at the door from version 4. Each predicate takes the
published trigger step (``{"type", "type_version", ...}``; graphs from before node-type
versions have no ``type_version`` and count as version 1) and its config. Pure. A draft
(the designer's test URL) is what its next publish would be: the node's newest version
(:func:`draft_step`).
"""

from __future__ import annotations

from typing import Any

from backend.engine.nodes import BUILTIN_NODES
from backend.engine.nodes.trigger_webhook import (
    CLOUDEVENTS,
    FAILURE_ANSWER,
    INVALID_BODY,
    INVALID_BODY_MODES,
)

__all__ = [
    "WEBHOOK_TRIGGER",
    "answers_failure_detail",
    "draft_step",
    "invalid_body_mode",
    "takes_cloudevents",
]

WEBHOOK_TRIGGER = "trigger.webhook"
NEWEST_VERSION = max(n.spec.version for n in BUILTIN_NODES if n.spec.type == WEBHOOK_TRIGGER)
"""The version a draft's webhook trigger compiles to, and so publishes as."""


def draft_step(node_type: str) -> dict[str, Any]:
    """A draft's trigger node of type ``node_type`` as the published step it would become
    (for the predicates below): the newest version of ``trigger.webhook``."""
    return {"type": node_type, "type_version": NEWEST_VERSION}


def takes_cloudevents(step: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether a published trigger step takes CloudEvents: ``trigger.webhook`` version 2 or
    later with ``cloudevents`` true (version 1 never had the key in its schema)."""
    return (
        step.get("type") == WEBHOOK_TRIGGER
        and int(step.get("type_version") or 1) >= 2
        and config.get(CLOUDEVENTS) is True
    )


def invalid_body_mode(step: dict[str, Any], config: dict[str, Any]) -> str | None:
    """What a published trigger step does with a body breaking its ``body_schema``:
    ``trigger.webhook`` version 4 or later with a body schema ``reject`` (the default) or
    ``mark_invalid``; ``None`` (not checked) for earlier versions, which keep running as
    published, and without a schema."""
    if step.get("type") != WEBHOOK_TRIGGER or int(step.get("type_version") or 1) < 4:
        return None
    if not isinstance(config.get("body_schema"), dict) or not config["body_schema"]:
        return None
    mode = config.get(INVALID_BODY)
    return mode if mode in INVALID_BODY_MODES else "reject"


def answers_failure_detail(step: dict[str, Any], config: dict[str, Any]) -> bool:
    """Whether a published trigger step answers a failed run with its error:
    ``trigger.webhook`` version 3 or later with ``failure_answer`` ``detailed``. Every
    other webhook answers a generic failure (the run id and status only)."""
    return (
        step.get("type") == WEBHOOK_TRIGGER
        and int(step.get("type_version") or 1) >= 3
        and config.get(FAILURE_ANSWER) == "detailed"
    )
