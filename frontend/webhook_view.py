"""The designer toolbar's webhook box: full URL and accepted methods of the active version.

The box shows what a caller needs to call the *published* workflow: the URL with the
trigger's path suffix (``/hooks/<token>[/<suffix>]``) and the HTTP methods it accepts.
A workflow whose active version is not started by a webhook trigger has no box (its
webhook URL answers 404).
"""

from __future__ import annotations

from typing import Any

from backend.engine.nodes.trigger_webhook import WebhookConfig
from backend.services.triggers import webhooks
from backend.services.unit_of_work import UnitOfWork
from backend.services.workflows.records import WorkflowRecord


def webhook_view(base_url: str, token: str, config: WebhookConfig) -> dict[str, Any]:
    """``{"url", "methods", "enabled"}`` of a webhook trigger's ``config``.

    ``url``: ``<base_url>/hooks/<token>`` plus ``/<path_suffix>`` when the config has one;
    ``methods``: the upper-cased, comma-separated ``methods`` (default ``["POST"]``);
    ``enabled``: ``False`` when the trigger is switched off (the URL then answers 404).
    """
    suffix = config.suffix
    url = f"{base_url.rstrip('/')}/hooks/{token}" + (f"/{suffix}" if suffix else "")
    return {"url": url, "methods": config.allowed_methods, "enabled": config.enabled}


async def active_webhook(
    db: UnitOfWork, base_url: str, wf: WorkflowRecord
) -> dict[str, Any] | None:
    """:func:`webhook_view` of ``wf``'s active version; ``None`` when unpublished or when
    its trigger is not a webhook."""
    if wf.active_version is None:
        return None
    endpoint = await webhooks.load_endpoint(db, wf.webhook_token)
    if endpoint is None or endpoint.version is None or not endpoint.is_webhook:
        return None
    return webhook_view(base_url, wf.webhook_token, endpoint.config)
