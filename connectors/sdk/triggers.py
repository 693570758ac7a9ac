"""Declaring trigger node types: what starts a run, and the code that hears the app.

A trigger node type declares its *kind*; the product runs every kind below, and a
workflow whose trigger has no mechanism behind it is refused at publish.

=============  ===========================================================================
kind           what runs it and what the connector provides
=============  ===========================================================================
``webhook``    the product's webhook endpoint (``/hooks/<token>``); nothing to provide:
               the run input is ``{"body", "headers", "query", "method"}``
``schedule``   the product's scheduler (the built-in ``trigger.schedule`` only)
``manual``     a user or the API; nothing to provide
``app_webhook``  push: the vendor calls the trigger's own URL. ``receive(config, request,
               registration) -> PushResponse`` verifies the delivery (signature, replay
               window), answers handshakes and returns the events; optional lifecycle
               hooks ``register`` / ``check`` / ``unregister`` create, check and delete
               the hook at the vendor when a version is activated, replaced, archived
               or deactivated (n8n's ``checkExists`` / ``create`` / ``delete``)
``polling``    ``poll(config, cursor) -> PollResult``: the events since ``cursor`` and
               the cursor to store; the product calls it every ``interval`` seconds
``broker``     ``listen(config, emit)``: a long-lived subscription; ``await emit(event)``
               returns once the event's run is stored, so the connector acks the
               message after it (a crash before the ack redelivers; the event id keeps
               it to one run)
``email``      ``listen(config, emit)`` as for ``broker`` (IMAP IDLE or polling inside)
=============  ===========================================================================

Every event carries an ``id``: the dedupe key (vendor delivery id, item id, broker
message id, email Message-ID). The product starts exactly one run per ``(workflow, id)``,
whatever crashes or redeliveries happen. Trigger code runs inside an
:class:`~connectors.sdk.ActionContext`, so ``sdk.http_client()``, ``sdk.credential()``,
``sdk.setting()`` and ``sdk.logger()`` work as in actions.

A trigger may also declare ``validate(config)``: the checks of its config that need no
connection (a broker URL's scheme, a password written into a URL). The compiler runs it
on the saved config, so a config that could never work blocks publishing with an
``invalid_config`` error on its field instead of failing at every reconnect.

Example (polling)::

    class Config(msgspec.Struct):
        credential: Annotated[str, sdk.credential_meta("acme_api")]

    @sdk.polling_trigger("acme.new_order", label="New order", config=Config, interval=60)
    async def new_orders(config: Config, cursor: str | None) -> sdk.PollResult:
        page = (await sdk.http_client().get(URL, params={"after": cursor or ""})).json()
        events = [sdk.TriggerEvent(id=o["id"], data=o) for o in page["orders"]]
        return sdk.PollResult(events=events, cursor=page["last_id"] or cursor)
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from .context import ActionContext, _current
from .credentials import credential_types_of_schema
from .errors import ConfigError
from .redaction import redact_exception
from .schema import config_json_schema, output_json_schema
from .signatures import check_timestamp, hmac_hex, verify_hmac
from .trigger_types import (
    MAX_EVENT_ID,
    CheckFn,
    DeliveryRefused,
    Emit,
    ListenFn,
    PollFn,
    PollResult,
    PushRequest,
    PushResponse,
    ReceiveFn,
    RegisterFn,
    Registration,
    TriggerEvent,
    UnregisterFn,
    ValidateFn,
)

__all__ = [
    "LISTEN_KINDS",
    "MAX_EVENT_ID",
    "TRIGGER_KINDS",
    "DeliveryRefused",
    "Emit",
    "PollResult",
    "PushRequest",
    "PushResponse",
    "Registration",
    "TriggerDefinition",
    "TriggerEvent",
    "app_webhook_trigger",
    "check_timestamp",
    "hmac_hex",
    "listen_trigger",
    "polling_trigger",
    "trigger",
    "verify_hmac",
]

TRIGGER_KINDS: tuple[str, ...] = (
    "webhook",
    "schedule",
    "manual",
    "app_webhook",
    "polling",
    "broker",
    "email",
)
"""Every kind of trigger the product runs (see the module doc)."""

LISTEN_KINDS: tuple[str, ...] = ("broker", "email")
"""Kinds run by a long-lived ``listen(config, emit)`` subscription."""


@dataclass(frozen=True)
class TriggerDefinition:
    """A declared trigger node type (kind ``trigger``): it starts runs, it has no input.

    Attributes:
        type: node type name (``"slack.message_posted"``); starts with its connector's name.
        label, description, icon, category: how the palette shows it.
        kind: one of :data:`TRIGGER_KINDS`.
        config_type: the ``msgspec.Struct`` of the trigger config.
        output_example: a JSON-able example of the run input (the "Fetch test event"
            fallback and the catalog page's example).
        output_type: the type of that run input; its JSON Schema is the trigger's output
            schema, against which the designer checks the paths expressions read.
        poll: the polling function (kind ``polling``).
        interval: default seconds between polls; ``min_interval`` is the floor a user
            may set.
        receive: the push handler (kind ``app_webhook``).
        register, check, unregister: the app webhook's lifecycle hooks (all optional;
            ``register`` is required when ``unregister`` or ``check`` is given).
        response_deadline: seconds the vendor waits for an answer (Slack: 3).
        listen: the subscription (kinds ``broker`` and ``email``).
        validate: optional ``validate(config)`` (:data:`ValidateFn`) of the parsed config:
            the checks that need no connection. The product runs it when a workflow is
            compiled (an error blocks publishing) and before every hook call.
    """

    type: str
    label: str
    kind: str
    config_type: builtins.type[Any]
    description: str = ""
    category: str = "Triggers"
    icon: str = ""
    output_example: Any = None
    output_type: Any = Any
    poll: PollFn | None = None
    interval: float = 300.0
    min_interval: float = 30.0
    receive: ReceiveFn | None = None
    register: RegisterFn | None = None
    check: CheckFn | None = None
    unregister: UnregisterFn | None = None
    response_deadline: float = 10.0
    listen: ListenFn | None = None
    validate: ValidateFn | None = None

    @property
    def source(self) -> str:
        """The kind, under its earlier name."""
        return self.kind

    def config_json_schema(self) -> dict[str, Any]:
        """JSON Schema of the trigger config with ``$ref`` inlined."""
        return config_json_schema(self.config_type)

    def output_json_schema(self) -> dict[str, Any]:
        """JSON Schema of the run input (from ``output_type``; ``{}`` when it is ``Any``)."""
        return output_json_schema(self.output_type)

    def parse_config(self, config: Mapping[str, Any]) -> Any:
        """Convert ``config`` to ``config_type``; raises :class:`ConfigError`."""
        try:
            return msgspec.convert(dict(config), self.config_type, strict=False)
        except msgspec.ValidationError as err:
            raise ConfigError(f"invalid config for {self.type}: {err}") from None

    def config_problem(self, config: Mapping[str, Any]) -> ConfigError | None:
        """The :class:`ConfigError` ``validate`` raises for ``config``, or ``None`` when it
        passes, when this trigger has no ``validate``, or when ``config`` does not parse
        (the compiler reports missing and mistyped fields itself)."""
        if self.validate is None:
            return None
        try:
            parsed = self.parse_config(config)
        except ConfigError:
            return None
        try:
            self.validate(parsed)
        except ConfigError as err:
            return err
        return None

    async def call(
        self,
        hook: str,
        config: Mapping[str, Any],
        context: ActionContext,
        *args: Any,
    ) -> Any:
        """Run ``hook`` (``"poll"``, ``"receive"``, ``"register"``, ``"check"``,
        ``"unregister"``, ``"listen"``) with the parsed config and ``args`` inside
        ``context`` (credential fields resolved first). Raises ``ValueError`` when this
        trigger has no such hook, :class:`ConfigError` for an invalid config, and whatever
        the hook raises."""
        fn = getattr(self, hook, None) if hook in _HOOKS else None
        if fn is None:
            raise ValueError(f"trigger {self.type} has no {hook!r} hook")
        parsed = self.parse_config(config)
        if self.validate is not None:
            self.validate(parsed)
        token = _current.set(context)
        try:
            refs: dict[str, tuple[str, tuple[str, ...]]] = {}
            for name, accepted in credential_types_of_schema(self.config_json_schema()).items():
                value = config.get(name)
                if isinstance(value, str) and value:
                    refs[name] = (value, accepted)
            if refs:
                await context.load_credentials(refs)
            result = await fn(parsed, *args)
            if context.secret_forms and isinstance(result, PollResult | PushResponse):
                # its events become run inputs: no credential secret in them (the cursor
                # is the trigger's own state, kept as it is)
                result.events = [
                    msgspec.structs.replace(
                        e, data=context.redact(e.data), meta=context.redact(e.meta)
                    )
                    for e in result.events
                ]
            return result
        except Exception as exc:  # its message is shown on the trigger page and logged
            redact_exception(exc, context.secret_forms)
            raise
        finally:
            try:
                await context.aclose()
            finally:
                _current.reset(token)


_HOOKS = frozenset({"poll", "receive", "register", "check", "unregister", "listen"})


class _NoConfig(msgspec.Struct):
    """A trigger without settings."""


def _checked(type: str, config: Any, fn: Any = None) -> None:
    if not (inspect.isclass(config) and issubclass(config, msgspec.Struct)):
        raise TypeError(f"trigger {type!r}: config must be a msgspec.Struct subclass")
    if fn is not None and not inspect.iscoroutinefunction(fn):
        raise TypeError(f"trigger {type!r}: {fn!r} must be an async function")


def _checked_validate(type: str, validate: Any) -> None:
    if validate is not None and (not callable(validate) or inspect.iscoroutinefunction(validate)):
        raise TypeError(f"trigger {type!r}: validate must be a plain (not async) function")


def _description(description: str, fn: Any) -> str:
    doc = inspect.getdoc(fn) or ""
    return description or (doc.splitlines()[0] if doc else "")


def trigger(
    type: str,
    *,
    label: str,
    kind: str | None = None,
    source: str | None = None,
    config: builtins.type[Any] = _NoConfig,
    description: str = "",
    category: str = "Triggers",
    icon: str = "",
    output_example: Any = None,
    output: Any = Any,
) -> TriggerDefinition:
    """Declare a trigger the product runs by itself: ``kind`` ``"webhook"`` (the run input
    is the request) or ``"manual"``. ``source`` is the earlier name of ``kind``.

    Raises ``ValueError`` for any other kind (polling, push and listening triggers are
    declared with :func:`polling_trigger`, :func:`app_webhook_trigger` and
    :func:`listen_trigger`, which carry the code that hears the app; ``schedule`` is the
    built-in ``trigger.schedule``) and ``TypeError`` when ``config`` is not a
    ``msgspec.Struct``.
    """
    chosen = kind or source or "webhook"
    if chosen not in ("webhook", "manual"):
        raise ValueError(
            f"trigger {type!r}: kind {chosen!r} needs its code: declare it with "
            "sdk.polling_trigger, sdk.app_webhook_trigger or sdk.listen_trigger "
            "(a schedule is the built-in trigger.schedule)"
        )
    _checked(type, config)
    return TriggerDefinition(
        type=type,
        label=label,
        kind=chosen,
        config_type=config,
        description=description,
        category=category,
        icon=icon,
        output_example=output_example,
        output_type=output,
    )


def polling_trigger(
    type: str,
    *,
    label: str,
    config: builtins.type[Any] = _NoConfig,
    interval: float = 300.0,
    min_interval: float = 30.0,
    description: str = "",
    category: str = "Triggers",
    icon: str = "",
    output_example: Any = None,
    output: Any = Any,
    validate: ValidateFn | None = None,
) -> Callable[[PollFn], TriggerDefinition]:
    """Decorator declaring ``async def poll(config, cursor) -> PollResult`` as a polling
    trigger (``interval`` and ``min_interval`` in seconds; ``min_interval`` >= 1).

    On a workflow's first activation the product polls once with ``cursor=None`` and
    stores the cursor without starting runs ("from now"), unless the user chose to
    include existing items. Raise :class:`~connectors.sdk.ActionError` with
    ``retry_after`` (or let ``sdk.raise_for_status`` do it on 429/5xx) to back off.
    """
    _checked(type, config)
    _checked_validate(type, validate)
    if not 1 <= min_interval <= interval:
        raise ValueError(f"trigger {type!r}: need 1 <= min_interval <= interval")

    def decorate(fn: PollFn) -> TriggerDefinition:
        _checked(type, config, fn)
        return TriggerDefinition(
            type=type,
            label=label,
            kind="polling",
            config_type=config,
            description=_description(description, fn),
            category=category,
            icon=icon,
            output_example=output_example,
            output_type=output,
            poll=fn,
            validate=validate,
            interval=float(interval),
            min_interval=float(min_interval),
        )

    return decorate


def app_webhook_trigger(
    type: str,
    *,
    label: str,
    config: builtins.type[Any] = _NoConfig,
    register: RegisterFn | None = None,
    check: CheckFn | None = None,
    unregister: UnregisterFn | None = None,
    response_deadline: float = 10.0,
    description: str = "",
    category: str = "Triggers",
    icon: str = "",
    output_example: Any = None,
    output: Any = Any,
    validate: ValidateFn | None = None,
) -> Callable[[ReceiveFn], TriggerDefinition]:
    """Decorator declaring ``async def receive(config, request, registration) ->
    PushResponse`` as an app webhook (push) trigger with optional lifecycle hooks:

    - ``register(config, url) -> Registration``: create the hook at the vendor for the
      trigger's ``url``; called when a version with this trigger is activated;
    - ``check(config, registration) -> bool``: whether the hook still exists (False
      registers it again);
    - ``unregister(config, registration)``: delete it (version replaced, workflow archived
      or deactivated).

    ``response_deadline`` is how long the vendor waits for the answer, in seconds.
    """
    _checked(type, config)
    _checked_validate(type, validate)
    for hook in (register, check, unregister):
        if hook is not None and not inspect.iscoroutinefunction(hook):
            raise TypeError(f"trigger {type!r}: {hook!r} must be an async function")
    if register is None and (check is not None or unregister is not None):
        raise ValueError(f"trigger {type!r}: check and unregister need register")

    def decorate(fn: ReceiveFn) -> TriggerDefinition:
        _checked(type, config, fn)
        return TriggerDefinition(
            type=type,
            label=label,
            kind="app_webhook",
            config_type=config,
            description=_description(description, fn),
            category=category,
            icon=icon,
            output_example=output_example,
            output_type=output,
            receive=fn,
            validate=validate,
            register=register,
            check=check,
            unregister=unregister,
            response_deadline=float(response_deadline),
        )

    return decorate


def listen_trigger(
    type: str,
    *,
    label: str,
    kind: str = "broker",
    config: builtins.type[Any] = _NoConfig,
    description: str = "",
    category: str = "Triggers",
    icon: str = "",
    output_example: Any = None,
    output: Any = Any,
    validate: ValidateFn | None = None,
) -> Callable[[ListenFn], TriggerDefinition]:
    """Decorator declaring ``async def listen(config, emit)`` as a long-lived
    subscription of kind ``"broker"`` or ``"email"``.

    ``listen`` connects, then for each message builds a :class:`TriggerEvent` and
    ``await emit(event)``; ``emit`` returns once the run is stored: ack the message after
    it, never before. ``listen`` returns or raises when the connection ends (the product
    reconnects with backoff) and is cancelled when the workflow's version is replaced.
    A message that is not valid for the trigger (not decodable, no id): hand it to
    ``await emit.dead_letter(reason, raw, meta)``, then ack it; it is never lost silently.
    ``validate(config)`` checks what needs no connection (see the module doc).
    For throughput, keep several messages in flight (``emit`` called for the next before
    the last returned, each acked when its own call returns): the product stores the
    events of overlapping calls together.
    """
    if kind not in LISTEN_KINDS:
        raise ValueError(f"trigger {type!r}: kind must be one of {LISTEN_KINDS}")
    _checked(type, config)
    _checked_validate(type, validate)

    def decorate(fn: ListenFn) -> TriggerDefinition:
        _checked(type, config, fn)
        return TriggerDefinition(
            type=type,
            label=label,
            kind=kind,
            config_type=config,
            description=_description(description, fn),
            category=category,
            icon=icon,
            output_example=output_example,
            output_type=output,
            listen=fn,
            validate=validate,
        )

    return decorate
