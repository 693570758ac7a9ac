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

The environment builds an :class:`~connectors.sdk.ActionContext` per call (through the
host's :func:`connectors.host.contexts.action_context`) with fixed
identifiers, records heartbeats, lets a test request cancellation, resolves credential
fields from :attr:`ActionTestEnvironment.credentials`, and uses an SSRF policy that allows
private addresses by default (so local test servers are reachable).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from connectors.host.contexts import action_context
from connectors.sdk import (
    ActionDefinition,
    ActionInfo,
    CredentialType,
    NonRetryableError,
    SsrfPolicy,
)

__all__ = ["ActionTestEnvironment"]

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
            return {**fields, "id": credential_id, "type": type_name, "kind": kind}

        context = action_context(
            self.info_for(action_def),
            ssrf=self.ssrf,
            http_client=self.http_client,
            heartbeat=self.heartbeats.append,
            cancelled=lambda: self.cancelled,
            logger=self.logger,
            settings=dict(self.settings),
            credential_resolver=resolve,
        )
        return await action_def.run(config, input, context)
