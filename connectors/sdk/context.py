"""Run details for the action being executed, read through context functions.

Like ``temporalio.activity``: the engine builds an :class:`ActionContext` per attempt and
:meth:`ActionDefinition.run <connectors.sdk.action.ActionDefinition.run>` installs it in a
context variable; inside the action, module-level functions read it::

    from connectors import sdk

    async def my_action(config, input):
        sdk.info().idempotency_key
        sdk.heartbeat({"done": 10})
        if sdk.is_cancelled(): ...
        response = await sdk.http_client().get(config.url)
        sdk.logger().info("fetched %s", config.url)
        password = sdk.credential("credential")["password"]

Every function raises ``RuntimeError`` when called outside an action.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from .errors import ConfigError
from .redaction import credential_secrets, redact, secret_forms
from .ssrf import SsrfPolicy

__all__ = [
    "ActionContext",
    "ActionInfo",
    "CredentialResolver",
    "HeartbeatCallback",
    "credential",
    "heartbeat",
    "http_client",
    "info",
    "is_cancelled",
    "logger",
    "setting",
]

HeartbeatCallback = Callable[[Any], Awaitable[None] | None]
"""Called with the heartbeat details; may be a plain function or a coroutine function."""


class ActionInfo(msgspec.Struct, frozen=True):
    """Who is running: identifiers of the current attempt (built once by the worker that
    claims the attempt, and the same object everywhere: the connector's context, the
    credential audit, logs).

    Attributes:
        run_id: id of the run.
        workflow_id: id of the workflow the run belongs to.
        step_id: id of the step (the diagram node id).
        attempt: 1-based attempt number; 2 is the first retry.
        idempotency_key: stable across retries of the same logical call (same run, step
            and activation); send it to remote APIs that deduplicate.
        node_type: the step's node type, e.g. ``"http.request"``.
        workflow_version: the version number the run pins (0 when unknown).
        node_version: the version of ``node_type`` the step runs (pinned at publish).
    """

    run_id: str
    workflow_id: str
    step_id: str
    attempt: int
    idempotency_key: str
    node_type: str
    workflow_version: int = 0
    node_version: int = 1


CredentialResolver = Callable[[str, tuple[str, ...]], Awaitable[dict[str, Any]]]
"""``await resolver(credential_id, accepted_types) -> fields``.

Returns the decrypted credential as a dict (its fields plus ``id``, ``type``, ``kind`` and
``secret_fields``, the names of the type's write-only fields, whose values the host
redacts from outputs, errors and logs: :mod:`connectors.sdk.redaction`;
OAuth2 credentials also carry a fresh ``access_token``, ``token_type`` and ``expires_at``
in epoch seconds). Raises :class:`~connectors.sdk.errors.ActionError` (usually
non-retryable) when the credential is missing, of another type, or cannot be refreshed.
"""


def _never_cancelled() -> bool:
    return False


@dataclass
class ActionContext:
    """Everything the host hands an action attempt (what the context functions read).

    Connectors read it through :func:`current_context` and the context functions; the
    host builds it (:func:`connectors.host.contexts.action_context` for Railyard and for
    :class:`connectors.testing.ActionTestEnvironment`).

    Attributes:
        info: identifiers of the attempt.
        heartbeat: callback receiving heartbeat details (sync or async), or ``None``.
        cancelled: returns ``True`` once the engine asked the attempt to stop.
        http_client: an ``httpx.AsyncClient`` to share (not closed by the SDK), or a
            zero-argument factory called lazily at most once per attempt (that client is
            closed when the action returns). ``None``: the attempt has no HTTP client
            (:func:`http_client` raises ``RuntimeError``).
        logger: logger for the action; defaults to ``railyard.connectors.<node_type>``.
        ssrf: the outbound policy the host's HTTP client enforces; connectors dialling
            other protocols check it themselves (``ssrf.resolve_and_check(host, port)``).
        settings: deployment settings for connectors, e.g. ``{"slack.api_url": ...}``
            (read with :func:`setting`); base URLs of SaaS APIs live here, never in node
            config, so a workflow cannot send a credential to a host of its choosing.
        credential_resolver: resolves credential ids found in the config (see
            :data:`CredentialResolver`); ``None`` means no credential store is available.
    """

    info: ActionInfo
    heartbeat: HeartbeatCallback | None = None
    cancelled: Callable[[], bool] = _never_cancelled
    http_client: httpx.AsyncClient | Callable[[], httpx.AsyncClient] | None = None
    logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None
    ssrf: SsrfPolicy = field(default_factory=SsrfPolicy)
    settings: Mapping[str, Any] = field(default_factory=dict)
    credential_resolver: CredentialResolver | None = None
    _credentials: dict[str, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)
    _secrets: list[str] = field(default_factory=list, init=False, repr=False)
    secret_forms: tuple[str, ...] = field(default=(), init=False, repr=False)
    """The forms of the loaded credentials' secrets (:mod:`connectors.sdk.redaction`)."""
    _client: httpx.AsyncClient | None = field(default=None, init=False, repr=False)
    _owns_client: bool = field(default=False, init=False, repr=False)
    _pending: list[asyncio.Task[Any]] = field(default_factory=list, init=False, repr=False)

    def get_http_client(self) -> httpx.AsyncClient:
        """The attempt's HTTP client (created on first call)."""
        if self._client is None:
            source = self.http_client
            if isinstance(source, httpx.AsyncClient):
                self._client = source
            elif source is None:
                raise RuntimeError("this attempt has no HTTP client (the host provided none)")
            else:
                self._client = source()
                self._owns_client = True
        return self._client

    async def load_credentials(self, refs: dict[str, tuple[str, tuple[str, ...]]]) -> None:
        """Resolve ``{field: (credential_id, accepted_types)}`` before the action runs.

        Raises :class:`~connectors.sdk.errors.ConfigError` when there is no resolver and
        whatever the resolver raises.
        """
        for name, (credential_id, accepted) in refs.items():
            if self.credential_resolver is None:
                raise ConfigError(
                    f"field {name!r} references credential {credential_id!r} but no "
                    "credential store is available"
                )
            resolved = dict(await self.credential_resolver(credential_id, accepted))
            self._credentials[name] = resolved
            self._secrets.extend(credential_secrets(resolved))
            self.secret_forms = secret_forms(self._secrets)

    def redact(self, value: Any) -> Any:
        """``value`` (JSON-able builtins) with the loaded credentials' secrets replaced by
        ``[redacted]`` (:func:`connectors.sdk.redaction.redact`); unchanged when the
        attempt loaded none."""
        return redact(value, self.secret_forms)

    def get_credential(self, name: str | None = None) -> dict[str, Any]:
        """The resolved credential of config field ``name`` (see :func:`credential`)."""
        if name is None:
            if len(self._credentials) == 1:
                return dict(next(iter(self._credentials.values())))
            raise ConfigError(
                "sdk.credential() needs a field name: this node has "
                f"{len(self._credentials)} credentials set"
            )
        if name not in self._credentials:
            raise ConfigError(f"no credential is selected in the field {name!r}")
        return dict(self._credentials[name])

    def get_logger(self) -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
        """The attempt's logger."""
        if self.logger is None:
            self.logger = logging.getLogger(f"railyard.connectors.{self.info.node_type}")
        return self.logger

    def record_heartbeat(self, details: Any) -> None:
        """Forward ``details`` to the heartbeat callback (async callbacks run as tasks)."""
        if self.heartbeat is None:
            return
        result = self.heartbeat(details)
        if inspect.isawaitable(result):
            self._pending.append(asyncio.ensure_future(result))

    async def aclose(self) -> None:
        """Finish pending heartbeats and close a client the context created."""
        if self._pending:
            pending, self._pending = self._pending, []
            results = await asyncio.gather(*pending, return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    self.get_logger().warning("heartbeat callback failed: %r", result)
        if self._client is not None and self._owns_client:
            client, self._client = self._client, None
            self._owns_client = False
            await client.aclose()


_current: contextvars.ContextVar[ActionContext] = contextvars.ContextVar("railyard_action_context")


def current_context() -> ActionContext:
    """The :class:`ActionContext` of the running action; ``RuntimeError`` outside one."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("not running inside a Railyard action") from None


def info() -> ActionInfo:
    """Identifiers of the current attempt (see :class:`ActionInfo`)."""
    return current_context().info


def heartbeat(details: Any = None) -> None:
    """Report progress; ``details`` (JSON-able) is kept so a retry can resume from it."""
    current_context().record_heartbeat(details)


def is_cancelled() -> bool:
    """True once the engine asked this attempt to stop; return or raise promptly."""
    return current_context().cancelled()


def http_client() -> httpx.AsyncClient:
    """The attempt's ``httpx.AsyncClient``: SSRF-guarded, 30 s default timeout,
    ``User-Agent: Railyard/<version>``, 10 MiB response cap. Do not close it."""
    return current_context().get_http_client()


def credential(field: str | None = None) -> dict[str, Any]:
    """The decrypted credential selected in config field ``field`` as a dict.

    Without ``field`` the node's only credential is returned. Raises
    :class:`~connectors.sdk.errors.ConfigError` (not retryable) when the field holds no
    credential. Never log or return what this gives you.
    """
    return current_context().get_credential(field)


def setting(name: str, default: Any = None) -> Any:
    """A deployment setting for connectors (``sdk.setting("slack.api_url", "https://...")``)."""
    return current_context().settings.get(name, default)


def logger() -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Logger for the current action (stdlib ``logging``)."""
    return current_context().get_logger()
