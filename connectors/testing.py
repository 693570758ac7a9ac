"""Test environment for connector authors (like ``temporalio.testing.ActivityEnvironment``).

::

    from connectors.testing import ActionTestEnvironment

    async def test_ping(local_server_url):
        env = ActionTestEnvironment()
        out = await env.run(ping, {"url": local_server_url}, input=None)
        assert out == {"status": 200}
        assert env.heartbeats == []

    async def test_with_a_credential():
        env = ActionTestEnvironment(credentials={"smtp-1": {"type": "smtp", "host": "127.0.0.1"}})
        await env.run(send_email, {"credential": "smtp-1", "to": ["a@example.com"]}, input=None)
        assert env.credential_uses == [("smtp-1", "credential")]

:class:`TriggerTestEnvironment` does the same for triggers: ``poll`` with a cursor, a
signed push delivery, the lifecycle hooks and a subscription's first events.

The environment builds an :class:`~connectors.sdk.ActionContext` per call (through the
host's :func:`connectors.host.contexts.action_context`) with fixed
identifiers, records heartbeats, lets a test request cancellation, resolves credential
fields from :attr:`ActionTestEnvironment.credentials`, and uses an SSRF policy that allows
private addresses by default (so local test servers are reachable).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from connectors.host.contexts import action_context
from connectors.sdk import (
    ActionContext,
    ActionDefinition,
    ActionInfo,
    CredentialType,
    NonRetryableError,
    PollResult,
    PushRequest,
    PushResponse,
    Registration,
    SsrfPolicy,
    TriggerDefinition,
    TriggerEvent,
)
from connectors.sdk.triggers import MAX_EVENT_ID

__all__ = [
    "ActionTestEnvironment",
    "DeadLetter",
    "ListenDone",
    "RecordingEmit",
    "TriggerTestEnvironment",
]

_TOKEN_KEYS = frozenset({"access_token", "refresh_token", "token_type", "expires_at"})


@dataclass
class ActionTestEnvironment:
    """Runs actions outside the engine.

    Attributes:
        ssrf: policy of the HTTP client handed to actions (private addresses allowed).
        run_id, workflow_id, step_id, attempt, idempotency_key, workflow_version: what
            ``sdk.info()`` reports (``idempotency_key`` defaults to
            ``"<run_id>:<step_id>"``; ``node_type`` is the action's type).
        http_client: an ``httpx.AsyncClient`` to use instead of the guarded default.
        heartbeats: every ``sdk.heartbeat(details)`` call's details, in order.
        cancelled: what ``sdk.is_cancelled()`` returns; set it with :meth:`cancel`.
        credentials: ``{credential_id: {"type": <type name>, **fields}}``; a config field
            declared with ``sdk.credential_meta`` holding one of these ids resolves to the
            fields (plus ``id``, ``type`` and ``kind``).
        credential_types: declared types used to validate ``credentials`` and fill defaults
            (optional; without it the fields are handed over as given).
        settings: what ``sdk.setting(name)`` returns (e.g. ``{"slack.api_url": url}``).
        credential_uses: ``(credential_id, field)`` for every credential resolved, in order.
    """

    ssrf: SsrfPolicy = field(default_factory=lambda: SsrfPolicy(allow_private=True))
    run_id: str = "run-test"
    workflow_id: str = "wf-test"
    step_id: str = "step-test"
    attempt: int = 1
    idempotency_key: str | None = None
    workflow_version: int = 1
    http_client: httpx.AsyncClient | None = None
    logger: logging.Logger | None = None
    heartbeats: list[Any] = field(default_factory=list)
    cancelled: bool = False
    credentials: dict[str, dict[str, Any]] = field(default_factory=dict)
    credential_types: list[CredentialType] = field(default_factory=list)
    credential_uses: list[tuple[str, str]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def cancel(self) -> None:
        """Make ``sdk.is_cancelled()`` return ``True`` from now on."""
        self.cancelled = True

    def info_for(self, action_def: ActionDefinition) -> ActionInfo:
        """The :class:`ActionInfo` an action run through this environment sees."""
        return ActionInfo(
            run_id=self.run_id,
            workflow_id=self.workflow_id,
            step_id=self.step_id,
            attempt=self.attempt,
            idempotency_key=self.idempotency_key or f"{self.run_id}:{self.step_id}",
            node_type=action_def.type,
            workflow_version=self.workflow_version,
            node_version=action_def.version,
        )

    async def run(self, action_def: ActionDefinition, config: dict[str, Any], input: Any) -> Any:
        """Run ``action_def`` once with ``config`` and ``input``; return its JSON output.

        Errors propagate exactly as the engine would see them (``ConfigError``,
        ``ActionError``, ...).
        """
        fields_by_id = {
            cid: name for name, (cid, _types) in action_def.credential_refs(config).items()
        }
        return await action_def.run(
            config, input, self.context_for(self.info_for(action_def), fields_by_id)
        )

    def context_for(self, info: ActionInfo, fields_by_id: dict[str, str]) -> ActionContext:
        """The context a node type's code runs in here (``fields_by_id``: credential id ->
        the config field naming it, for :attr:`credential_uses`)."""

        async def resolve(credential_id: str, accepted: tuple[str, ...]) -> dict[str, Any]:
            stored = self.credentials.get(credential_id)
            if stored is None:
                raise NonRetryableError(
                    f"credential {credential_id!r} does not exist", kind="credential_missing"
                )
            type_name = str(stored.get("type", ""))
            if type_name not in accepted:
                raise NonRetryableError(
                    f"credential {credential_id!r} is a {type_name!r} credential; this field "
                    f"accepts {', '.join(accepted)}",
                    kind="credential_type_mismatch",
                )
            fields = {k: v for k, v in stored.items() if k not in ("type", "kind")}
            declared = {t.name: t for t in self.credential_types}.get(type_name)
            kind = str(stored.get("kind", declared.kind if declared else "custom"))
            if declared is not None:
                extra = {k: v for k, v in fields.items() if k in _TOKEN_KEYS}
                fields = {
                    **declared.validate({k: v for k, v in fields.items() if k not in _TOKEN_KEYS}),
                    **extra,
                }
            self.credential_uses.append((credential_id, fields_by_id.get(credential_id, "")))
            secret_fields = list(declared.secret_fields) if declared is not None else []
            return {
                **fields,
                "id": credential_id,
                "type": type_name,
                "kind": kind,
                "secret_fields": secret_fields,
            }

        return action_context(
            info,
            ssrf=self.ssrf,
            http_client=self.http_client,
            heartbeat=self.heartbeats.append,
            cancelled=lambda: self.cancelled,
            logger=self.logger,
            settings=dict(self.settings),
            credential_resolver=resolve,
        )


@dataclass
class DeadLetter:
    """A message a listening trigger handed to ``emit.dead_letter``."""

    reason: str
    raw: bytes | str
    meta: dict[str, str]


class RecordingEmit:
    """The ``emit`` a listening trigger gets in :meth:`TriggerTestEnvironment.listen`:
    records events and dead letters, and ends the subscription (raising
    :class:`ListenDone` out of ``emit``, before the connector acks) once ``count``
    events arrived."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.events: list[TriggerEvent] = []
        self.dead_letters: list[DeadLetter] = []

    async def __call__(self, event: TriggerEvent) -> None:
        self.events.append(event)
        if len(self.events) >= self.count:
            raise ListenDone

    async def dead_letter(self, reason: str, raw: bytes | str, meta: dict[str, str]) -> None:
        self.dead_letters.append(DeadLetter(reason, raw, dict(meta)))


class ListenDone(Exception):
    """Raised out of ``emit`` to end a test subscription (the last event is not acked)."""


@dataclass
class TriggerTestEnvironment(ActionTestEnvironment):
    """Runs a trigger's code outside the product: drive ``poll`` with a cursor, send a
    (signed) push delivery, run the lifecycle hooks, take events from a subscription.

    ::

        env = TriggerTestEnvironment(settings={"acme.api_url": server_url})
        first = await env.poll(new_orders, {"credential": "c1"}, cursor=None)
        later = await env.poll(new_orders, {"credential": "c1"}, cursor=first.cursor)

        answer = await env.push(slack_message, {}, body=raw, headers=signed_headers)
        assert [e.id for e in answer.events] == ["Ev1"]

    ``now`` (Unix seconds) is the delivery time :meth:`push` reports (``time.time()``
    when ``None``); ``url`` is the trigger URL :meth:`register` hands to the connector.
    """

    now: float | None = None
    url: str = "https://railyard.test/hooks/app/test-token"

    def _info(self, trig: TriggerDefinition) -> ActionInfo:
        return ActionInfo(
            run_id="",
            workflow_id=self.workflow_id,
            step_id=self.step_id,
            attempt=1,
            idempotency_key=self.idempotency_key or f"{self.workflow_id}:{self.step_id}",
            node_type=trig.type,
            workflow_version=self.workflow_version,
        )

    async def _call(
        self, trig: TriggerDefinition, hook: str, config: dict[str, Any], *args: Any
    ) -> Any:
        fields_by_id = {v: k for k, v in config.items() if isinstance(v, str)}
        context = self.context_for(self._info(trig), fields_by_id)
        return await trig.call(hook, config, context, *args)

    async def poll(
        self, trig: TriggerDefinition, config: dict[str, Any], cursor: Any = None
    ) -> PollResult:
        """One ``poll(config, cursor)``; returns its :class:`PollResult` (events checked:
        each id non-empty)."""
        result = await self._call(trig, "poll", config, cursor)
        if not isinstance(result, PollResult):
            raise TypeError(f"{trig.type}: poll returned {type(result).__name__}, not PollResult")
        _check_events(trig, result.events)
        return result

    async def push(
        self,
        trig: TriggerDefinition,
        config: dict[str, Any],
        *,
        body: bytes | str | Any = b"",
        headers: dict[str, str] | None = None,
        method: str = "POST",
        query: dict[str, str] | None = None,
        registration: Registration | None = None,
    ) -> PushResponse:
        """Deliver one request to ``receive``; ``body``: bytes, text, or a JSON-able value
        (encoded as JSON). Raises :class:`~connectors.sdk.DeliveryRefused` as the product
        would answer it."""
        if isinstance(body, str):
            raw = body.encode()
        elif isinstance(body, bytes | bytearray):
            raw = bytes(body)
        else:
            raw = msgspec.json.encode(body)
        request = PushRequest(
            method=method,
            headers={k.lower(): v for k, v in (headers or {}).items()},
            body=raw,
            query=dict(query or {}),
            received_at=time.time() if self.now is None else self.now,
            url=self.url,
        )
        answer = await self._call(trig, "receive", config, request, registration)
        if not isinstance(answer, PushResponse):
            raise TypeError(f"{trig.type}: receive returned {type(answer).__name__}")
        _check_events(trig, answer.events)
        return answer

    async def register(self, trig: TriggerDefinition, config: dict[str, Any]) -> Registration:
        """Run the ``register`` hook with :attr:`url`."""
        return await self._call(trig, "register", config, self.url)  # type: ignore[no-any-return]

    async def check(
        self, trig: TriggerDefinition, config: dict[str, Any], registration: Registration
    ) -> bool:
        """Run the ``check`` hook."""
        return bool(await self._call(trig, "check", config, registration))

    async def unregister(
        self, trig: TriggerDefinition, config: dict[str, Any], registration: Registration
    ) -> None:
        """Run the ``unregister`` hook."""
        await self._call(trig, "unregister", config, registration)

    async def listen(
        self,
        trig: TriggerDefinition,
        config: dict[str, Any],
        *,
        count: int = 1,
        timeout: float = 10.0,
    ) -> RecordingEmit:
        """Subscribe until ``count`` events arrived (the last one is not acked, as when the
        product's process dies before its ack) or ``timeout`` seconds passed
        (``TimeoutError``); returns the :class:`RecordingEmit` with events and dead
        letters."""
        emit = RecordingEmit(count)
        try:
            await asyncio.wait_for(self._call(trig, "listen", config, emit), timeout)
        except ListenDone:
            pass
        _check_events(trig, emit.events)
        return emit


def _check_events(trig: TriggerDefinition, events: list[TriggerEvent]) -> None:
    for event in events:
        if not isinstance(event, TriggerEvent):
            raise TypeError(f"{trig.type}: {event!r} is not a TriggerEvent")
        if not event.id or len(event.id) > MAX_EVENT_ID:
            raise ValueError(
                f"{trig.type}: an event id must have 1 to {MAX_EVENT_ID} characters: {event.id!r}"
            )
