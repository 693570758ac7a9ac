"""Webhook use cases: endpoint lookup, the write-only secret, files, audit, test calls.

- :func:`load_endpoint` resolves a token to the workflow, its active version, the trigger
  config and the decrypted secret in one session; the API caches the result briefly.
- Secrets are AES-GCM encrypted (``backend.crypto``, associated data
  ``b"webhook-secret:" + workflow id bytes``) in ``webhook_secrets`` and never returned by
  any API; only whether one is set. :func:`rotate_secrets` re-encrypts them under a new key.
- Rejected requests are audited in ``webhook_deliveries`` plus an ``events`` row of kind
  ``webhook.rejected``; accepted ones are the runs themselves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import delete, func, literal, select, update
from sqlalchemy.dialects.postgresql import JSONPATH, insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend import crypto
from backend.db.models import (
    Event,
    Run,
    StoredFile,
    WebhookDelivery,
    WebhookSecret,
    WebhookTestCall,
    Workflow,
    WorkflowVersion,
)
from backend.engine.nodes.base import NodeError
from backend.engine.nodes.trigger_webhook import WebhookConfig
from backend.engine.ports import VersionRow
from backend.services import audit
from backend.services.triggers.webhook_versions import (
    WEBHOOK_TRIGGER,
    draft_config,
    draft_step,
    invalid_body_mode,
    published_config,
)
from backend.triggers.webhook_input import UploadedFile
from designer_schema.diagram import Diagram

WEBHOOK_TYPES: set[str] = {WEBHOOK_TRIGGER}
"""Node types the webhook endpoint starts runs for: ``trigger.webhook`` and every
connector trigger of kind ``webhook`` (:func:`accept_connector_triggers`). A connector's
webhook trigger is served with the endpoint's defaults (any method, no authentication
but the unguessable URL, 202 with the run id); its own config is the trigger step's."""


def accept_connector_triggers(triggers: dict[str, Any]) -> None:
    """Serve the connector triggers of kind ``webhook`` among ``triggers`` (node type ->
    SDK ``TriggerDefinition``, the catalog's) at the webhook endpoint."""
    WEBHOOK_TYPES.update(t for t, d in triggers.items() if getattr(d, "kind", None) == "webhook")


@dataclass
class Endpoint:
    """What a webhook request needs: workflow, active version, the trigger's decoded
    config (decoded once per load; ``config_error`` says why a stored config did not
    decode, the defaults standing in for the fields at fault), secret."""

    workflow_id: uuid.UUID
    version: VersionRow | None
    config: WebhookConfig
    secret: bytes | None
    is_webhook: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    archived: bool = False  # the workflow is archived: the webhook answers 410 Gone
    invalid_body: str | None = None  # v4: reject / mark_invalid a body breaking body_schema
    config_error: NodeError | None = None

    @property
    def cloudevents(self) -> bool:
        """trigger.webhook v2+ takes CloudEvents (docs/webhooks.md)."""
        return self.config.cloudevents

    @property
    def failure_detail(self) -> bool:
        """v3+'s explicit detailed answer to a failed run."""
        return self.config.failure_answer == "detailed"


def secret_aad(workflow_id: uuid.UUID) -> bytes:
    """Associated data binding a webhook secret's blob to its workflow (a blob copied to
    another workflow's row fails to decrypt)."""
    return b"webhook-secret:" + workflow_id.bytes


async def get_secret(session: AsyncSession, workflow_id: uuid.UUID) -> bytes | None:
    """The decrypted webhook secret, or ``None`` when none is set.

    Raises :class:`~backend.crypto.CryptoError` when no key is configured or the blob's
    key is neither the current nor an old one.
    """
    row = await session.get(WebhookSecret, workflow_id)
    if row is None:
        return None
    return crypto.decrypt(row.ciphertext, aad=secret_aad(workflow_id))


async def secret_is_set(session: AsyncSession, workflow_id: uuid.UUID) -> bool:
    """Whether the workflow has a webhook secret (the secret itself is never shown)."""
    return await session.get(WebhookSecret, workflow_id) is not None


async def set_secret(session: AsyncSession, workflow_id: uuid.UUID, secret: str | None) -> None:
    """Store (encrypted) or, with ``None``/empty, remove the workflow's webhook secret.

    Audited as ``webhook.secret_set`` / ``webhook.secret_delete`` (before/after say only
    whether a secret was set; never the secret). Removing an absent secret records nothing.
    """
    was_set = await secret_is_set(session, workflow_id)
    if not secret:
        await session.execute(delete(WebhookSecret).where(WebhookSecret.workflow_id == workflow_id))
        if was_set:
            await audit.record(
                session,
                "webhook.secret_delete",
                "webhook",
                workflow_id,
                before={"secret_set": True},
                after={"secret_set": False},
            )
        return
    await audit.record(
        session,
        "webhook.secret_set",
        "webhook",
        workflow_id,
        before={"secret_set": was_set},
        after={"secret_set": True},
    )
    ciphertext = crypto.encrypt(secret.encode(), aad=secret_aad(workflow_id))
    await session.execute(
        insert(WebhookSecret)
        .values(workflow_id=workflow_id, ciphertext=ciphertext)
        .on_conflict_do_update(index_elements=["workflow_id"], set_={"ciphertext": ciphertext})
    )


async def rotate_secrets(session: AsyncSession, keyring: crypto.Keyring) -> int:
    """Re-encrypt every webhook secret not under ``keyring``'s current key; returns the count.

    Rows are locked (``FOR UPDATE``). Raises :class:`~backend.crypto.CryptoError` when a
    blob's key is not in the keyring (nothing is changed then: run it inside one
    transaction, as ``railyard rotate-key`` does together with the credentials).
    """
    rows = (await session.execute(select(WebhookSecret).with_for_update())).scalars().all()
    count = 0
    for row in rows:
        if crypto.key_id_of(row.ciphertext) == keyring.current_id:
            continue
        row.ciphertext = keyring.reencrypt(row.ciphertext, aad=secret_aad(row.workflow_id))
        count += 1
    await session.flush()
    clear_endpoint_cache()
    return count


async def load_endpoint(
    session: AsyncSession, token: str, *, draft: bool = False
) -> Endpoint | None:
    """The endpoint of webhook ``token`` (active version; ``draft`` uses the draft diagram).

    ``None`` when no workflow has the token. ``version`` is ``None`` when never published.
    An archived workflow's endpoint has ``archived`` set and nothing else (no test calls
    either: ``draft`` answers ``None``).
    """
    if draft:
        wf = (
            await session.execute(select(Workflow).where(Workflow.webhook_token == token))
        ).scalar_one_or_none()
        if wf is None or wf.archived_at is not None:
            return None
        secret = await get_secret(session, wf.id)
        diagram = msgspec.convert(wf.draft, Diagram)
        nodes = [n for n in diagram.nodes if n.type in WEBHOOK_TYPES]
        config, problem = WebhookConfig(), None
        if nodes and nodes[0].type == WEBHOOK_TRIGGER:
            config, problem = draft_config(nodes[0].config)
        mode = invalid_body_mode(draft_step(nodes[0].type), config) if nodes else None
        return Endpoint(
            wf.id, None, config, secret, bool(nodes), invalid_body=mode, config_error=problem
        )
    # only the version's identity and its trigger step: a large workflow's diagram and
    # graph documents are never read (or decoded) to answer a webhook
    trigger_step = func.jsonb_path_query_first(
        WorkflowVersion.graph,
        literal("$.steps[*] ? (@.id == $t)", JSONPATH),
        func.jsonb_build_object("t", WorkflowVersion.graph["trigger"]),
    )
    found = (
        await session.execute(
            select(
                Workflow.id,
                WorkflowVersion.id,
                WorkflowVersion.number,
                trigger_step,
                Workflow.archived_at,
            )
            .outerjoin(
                WorkflowVersion,
                (WorkflowVersion.workflow_id == Workflow.id)
                & (WorkflowVersion.number == Workflow.active_version),
            )
            .where(Workflow.webhook_token == token)
        )
    ).one_or_none()
    if found is None:
        return None
    workflow_id, version_id, number, step, archived_at = found
    if archived_at is not None:
        return Endpoint(workflow_id, None, WebhookConfig(), None, archived=True)
    secret = await get_secret(session, workflow_id)
    if version_id is None:
        return Endpoint(workflow_id, None, WebhookConfig(), secret, False)
    step = step or {}
    version = VersionRow(version_id, workflow_id, int(number))
    try:
        config, problem = published_config(step), None
    except NodeError as exc:  # stored before its values were checked: answered, see api
        config, problem = WebhookConfig(), exc
    return Endpoint(
        workflow_id,
        version,
        config,
        secret,
        step.get("type") in WEBHOOK_TYPES,
        invalid_body=invalid_body_mode(step, config),
        config_error=problem,
    )


_CACHE: dict[str, tuple[float, Endpoint | None]] = {}
_CACHE_MAX = 10_000
_LOADING: dict[str, asyncio.Task[Endpoint | None]] = {}
_generation = 0  # moved by every clear: a load begun before it stores nothing

REFRESH_AHEAD = 0.5
"""Fraction of the cache time after which a hit also starts a reload in the background
(one per token), so a webhook under steady load never waits for its endpoint's reload."""

log = logging.getLogger(__name__)

clock: Callable[[], float] = time.monotonic
"""Seconds the endpoint cache ages by (replaceable in tests)."""


def clear_endpoint_cache() -> None:
    """Forget cached endpoints (after publishing or changing a secret in this process).

    A load still in flight when this is called answers the requests already waiting for
    it but is not stored, and later requests start a new one."""
    global _generation
    _generation += 1
    _CACHE.clear()
    _LOADING.clear()


async def cached_endpoint(
    sessionmaker: async_sessionmaker[AsyncSession], token: str, ttl: float
) -> Endpoint | None:
    """:func:`load_endpoint`, cached in this process for ``ttl`` seconds (0: no cache).

    Another process's publish or secret change is seen after at most ``ttl`` seconds.
    Requests for a token that is not cached share one load (single flight, in its own task:
    a request that goes away does not cancel it for the others); a hit older than
    :data:`REFRESH_AHEAD` of ``ttl`` also starts one reload in the background and is
    answered at once, so under steady load the entry is renewed before it expires instead
    of every request of that instant reloading it. Raises what :func:`load_endpoint`
    raises (a failed load reaches every request sharing it).
    """
    if ttl <= 0:
        async with sessionmaker() as session:
            return await load_endpoint(session, token)
    hit = _CACHE.get(token)
    if hit is not None:
        age = clock() - hit[0]
        if age < ttl:
            if age >= ttl * REFRESH_AHEAD:
                _start_load(sessionmaker, token)
            return hit[1]
    return await asyncio.shield(_start_load(sessionmaker, token))


def _start_load(
    sessionmaker: async_sessionmaker[AsyncSession], token: str
) -> asyncio.Task[Endpoint | None]:
    """The load of ``token``'s endpoint in flight, started now when there is none."""
    task = _LOADING.get(token)
    if task is None:
        task = asyncio.create_task(_load(sessionmaker, token, _generation))
        _LOADING[token] = task
        task.add_done_callback(functools.partial(_loaded, token))
    return task


async def _load(
    sessionmaker: async_sessionmaker[AsyncSession], token: str, generation: int
) -> Endpoint | None:
    """Load and cache ``token``'s endpoint (not cached when the cache was cleared after
    ``generation``)."""
    started = clock()
    async with sessionmaker() as session:
        endpoint = await load_endpoint(session, token)
    if generation == _generation:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[token] = (started, endpoint)
    return endpoint


def _loaded(token: str, task: asyncio.Task[Endpoint | None]) -> None:
    """Forget the finished load; a failure nobody waited for (a reload) is logged."""
    if _LOADING.get(token) is task:
        del _LOADING[token]
    if not task.cancelled() and task.exception() is not None:
        log.debug("loading the webhook endpoint failed: %s", task.exception())


async def store_files(
    session: AsyncSession, workflow_id: uuid.UUID, files: list[UploadedFile]
) -> list[dict[str, Any]]:
    """Store uploaded files; returns the run input's descriptors (no bytes)."""
    out = []
    for f in files:
        row = StoredFile(
            workflow_id=workflow_id,
            filename=f.filename[:500],
            content_type=f.content_type[:200],
            size=f.size,
            sha256=f.sha256,
            content=f.content,
        )
        session.add(row)
        await session.flush()
        out.append(
            {
                "field": f.field,
                "filename": f.filename,
                "content_type": f.content_type,
                "size": f.size,
                "sha256": f.sha256,
                "ref": f"file:{row.id}",
            }
        )
    return out


async def get_file(session: AsyncSession, file_id: uuid.UUID) -> StoredFile | None:
    """A stored file by id."""
    return await session.get(StoredFile, file_id)


async def record_rejection(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    *,
    method: str,
    status_code: int,
    reason: str,
    now: datetime,
    test: bool = False,
) -> None:
    """Audit a rejected request (no run was created)."""
    session.add(
        WebhookDelivery(
            workflow_id=workflow_id,
            received_at=now,
            method=method[:10],
            status_code=status_code,
            outcome="rejected",
            reason=reason[:2000],
            test=test,
        )
    )
    session.add(
        Event(
            run_id=None,
            kind="webhook.rejected",
            data={
                "workflow_id": str(workflow_id),
                "status": status_code,
                "reason": reason[:2000],
                "method": method,
                "test": test,
            },
            created_at=now,
        )
    )


async def release_expired_key(session: AsyncSession, key: str, older_than: datetime) -> None:
    """Free an idempotency key whose run is older than the window, so it can start anew."""
    await session.execute(
        update(Run)
        .where(Run.idempotency_key == key, Run.created_at < older_than)
        .values(idempotency_key=None)
    )


async def save_test_call(
    session: AsyncSession,
    workflow_id: uuid.UUID,
    now: datetime,
    input: Any,
    error: str | None = None,
) -> None:
    """Keep the last request to the test URL (its parsed input, or why it was refused)."""
    values = {"received_at": now, "input": input, "error": error}
    await session.execute(
        insert(WebhookTestCall)
        .values(workflow_id=workflow_id, **values)
        .on_conflict_do_update(index_elements=["workflow_id"], set_=values)
    )


async def last_test_call(session: AsyncSession, workflow_id: uuid.UUID) -> WebhookTestCall | None:
    """The last test call of the workflow, if any."""
    return await session.get(WebhookTestCall, workflow_id)


@dataclass
class DeliveryRow:
    """One line of the deliveries list: an accepted run or an audited rejection."""

    received_at: datetime
    outcome: str  # accepted | rejected
    status: str  # run status, or the HTTP status code of the rejection
    reason: str
    run_id: str | None
    method: str = ""


async def list_deliveries(
    session: AsyncSession, workflow_id: uuid.UUID, limit: int = 50
) -> list[DeliveryRow]:
    """Recent webhook deliveries, newest first: accepted runs and rejections merged."""
    runs = (
        await session.execute(
            select(Run.id, Run.created_at, Run.status)
            .where(Run.workflow_id == workflow_id, Run.trigger == "webhook")
            .order_by(Run.created_at.desc())
            .limit(limit)
        )
    ).all()
    rejected = (
        await session.execute(
            select(WebhookDelivery)
            .where(WebhookDelivery.workflow_id == workflow_id)
            .order_by(WebhookDelivery.id.desc())
            .limit(limit)
        )
    ).scalars()
    rows = [DeliveryRow(at, "accepted", status, "", str(rid)) for rid, at, status in runs]
    rows += [
        DeliveryRow(
            d.received_at,
            "rejected",
            str(d.status_code),
            ("test call: " if d.test else "") + d.reason,
            None,
            d.method,
        )
        for d in rejected
    ]
    rows.sort(key=lambda r: r.received_at, reverse=True)
    return rows[:limit]


def idempotency_cutoff(now: datetime, hours: float) -> datetime:
    """Runs created before this no longer hold their idempotency key."""
    return now - timedelta(hours=hours)
