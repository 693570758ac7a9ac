"""Railyard connector SDK: declare actions, read run details, call HTTP safely.

Reads like ``temporalio.activity``::

    import msgspec
    from connectors import sdk

    class Config(msgspec.Struct):
        url: str
        timeout: float = 30.0

    @sdk.action("acme.ping", label="Ping", config=Config, expression_fields=("url",))
    async def ping(config: Config, input: object) -> dict[str, int]:
        response = await sdk.http_client().get(config.url, timeout=config.timeout)
        sdk.raise_for_status(response)
        return {"status": response.status_code}

    connector = sdk.Connector(name="acme", label="Acme", version="1.0.0", actions=[ping])

Credentials (:mod:`connectors.sdk.credentials`): declare types with
:func:`credential_type`, reference one from a config field with :func:`credential_meta`,
read the decrypted fields with :func:`credential`. Trigger node types (push, polling, broker, email)
are declared with :func:`polling_trigger`, :func:`app_webhook_trigger`,
:func:`listen_trigger` and :func:`trigger` (:mod:`connectors.sdk.triggers`).

Register the connector under the ``railyard.connectors`` entry point. Test it with
:class:`connectors.testing.ActionTestEnvironment`. The SDK depends only on the standard
library, msgspec and httpx; it never imports the rest of Railyard. This package is the
author API only: what runs actions (the guarded HTTP client and its connection pool,
building each attempt's context) is the host's, in :mod:`connectors.host`.
"""

from .action import ActionDefinition, ActionFn, Connector, action
from .context import (
    ActionContext,
    ActionInfo,
    CredentialResolver,
    HeartbeatCallback,
    credential,
    current_context,
    heartbeat,
    http_client,
    info,
    is_cancelled,
    logger,
    setting,
)
from .credentials import (
    ApiKeyFields,
    BasicFields,
    BearerFields,
    CredentialType,
    OAuth2Fields,
    SmtpFields,
    credential_meta,
    credential_type,
    secret,
)
from .errors import (
    ActionError,
    ConfigError,
    NonRetryableError,
    http_errors,
    parse_retry_after,
    raise_for_status,
    redact_url,
)
from .schema import config_json_schema
from .ssrf import SsrfPolicy
from .triggers import (
    LISTEN_KINDS,
    TRIGGER_KINDS,
    DeliveryRefused,
    Emit,
    PollResult,
    PushRequest,
    PushResponse,
    Registration,
    TriggerDefinition,
    TriggerEvent,
    app_webhook_trigger,
    check_timestamp,
    hmac_hex,
    listen_trigger,
    polling_trigger,
    trigger,
    verify_hmac,
)

__all__ = [
    "LISTEN_KINDS",
    "TRIGGER_KINDS",
    "ActionContext",
    "ActionDefinition",
    "ActionError",
    "ActionFn",
    "ActionInfo",
    "ApiKeyFields",
    "BasicFields",
    "BearerFields",
    "ConfigError",
    "Connector",
    "CredentialResolver",
    "CredentialType",
    "DeliveryRefused",
    "Emit",
    "HeartbeatCallback",
    "NonRetryableError",
    "OAuth2Fields",
    "PollResult",
    "PushRequest",
    "PushResponse",
    "Registration",
    "SmtpFields",
    "SsrfPolicy",
    "TriggerDefinition",
    "TriggerEvent",
    "action",
    "app_webhook_trigger",
    "check_timestamp",
    "config_json_schema",
    "credential",
    "credential_meta",
    "credential_type",
    "current_context",
    "heartbeat",
    "hmac_hex",
    "http_client",
    "http_errors",
    "info",
    "is_cancelled",
    "listen_trigger",
    "logger",
    "parse_retry_after",
    "polling_trigger",
    "raise_for_status",
    "redact_url",
    "secret",
    "setting",
    "trigger",
    "verify_hmac",
]
