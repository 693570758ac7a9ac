"""Which trigger kinds the product runs, and the publish check that refuses the rest.

A trigger node type declares its kind (:data:`connectors.sdk.TRIGGER_KINDS`). The
built-in ``trigger.*`` node types are run by their own mechanisms (webhook endpoint,
scheduler, manual/API start); a connector trigger is run by the endpoint (kind
``webhook``), by a user (``manual``) or by the event service (:data:`EVENT_KINDS`). A
declaration nothing can run is refused at publish (:func:`unrunnable`), never a silent
no-op.
"""

from __future__ import annotations

from typing import Any

EVENT_KINDS: tuple[str, ...] = ("app_webhook", "polling", "broker", "email")
"""Kinds the event service runs (each has a subscription row)."""

LISTEN_KINDS: tuple[str, ...] = ("broker", "email")
"""Kinds run by a long-lived subscription in an events process."""

_HOOK_OF = {"app_webhook": "receive", "polling": "poll", "broker": "listen", "email": "listen"}


def unrunnable(definition: Any) -> str | None:
    """Why nothing can run the connector trigger ``definition`` (an SDK
    ``TriggerDefinition``), or ``None`` when the product runs it. The message names the
    node type and what is missing."""
    kind = getattr(definition, "kind", None) or getattr(definition, "source", None)
    node_type = getattr(definition, "type", "?")
    if kind in ("webhook", "manual"):
        return None
    if kind == "schedule":
        return (
            f"{node_type} declares kind 'schedule', which only the built-in Schedule "
            "trigger has: use trigger.schedule, or declare a polling trigger"
        )
    hook = _HOOK_OF.get(str(kind))
    if hook is None:
        return f"{node_type} declares the trigger kind {kind!r}, which Railyard does not run"
    if getattr(definition, hook, None) is None:
        return f"{node_type} is a {kind} trigger without its {hook!r} function"
    return None
