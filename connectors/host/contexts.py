"""Building the per-attempt :class:`~connectors.sdk.ActionContext` an action runs in."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from connectors.host.outbound import make_http_client
from connectors.sdk import ActionContext, ActionInfo, CredentialResolver, HeartbeatCallback
from connectors.sdk.ssrf import SsrfPolicy


def _never_cancelled() -> bool:
    return False


def action_context(
    info: ActionInfo,
    *,
    ssrf: SsrfPolicy,
    pool: httpx.AsyncBaseTransport | None = None,
    http_client: httpx.AsyncClient | None = None,
    heartbeat: HeartbeatCallback | None = None,
    cancelled: Callable[[], bool] = _never_cancelled,
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
    settings: Mapping[str, Any] | None = None,
    credential_resolver: CredentialResolver | None = None,
) -> ActionContext:
    """The context of one attempt.

    ``http_client``, when given, is shared (the SDK does not close it); otherwise the
    attempt gets, on its first ``sdk.http_client()`` call, a client from
    :func:`~connectors.host.outbound.make_http_client` guarded by ``ssrf`` over ``pool``
    (the process's shared keep-alive pool, or a pool of its own when ``None``), closed
    when the action returns. ``ssrf`` is also what connectors dialling other protocols
    check. ``logger`` defaults to ``railyard.connectors.<node type>``; ``settings`` are
    the deployment's connector settings (``sdk.setting``); ``credential_resolver``
    resolves credential fields (``None``: no credential store).
    """
    client: httpx.AsyncClient | Callable[[], httpx.AsyncClient] = http_client or (
        lambda: make_http_client(ssrf, pool=pool)
    )
    return ActionContext(
        info=info,
        heartbeat=heartbeat,
        cancelled=cancelled,
        http_client=client,
        logger=logger,
        ssrf=ssrf,
        settings=settings if settings is not None else {},
        credential_resolver=credential_resolver,
    )
