"""Built-in Redis connector (redis-py's asyncio client): ``redis.get``, ``redis.set``,
``redis.publish`` on a user's Redis (never Railyard's own).

The ``redis`` credential holds the server (host, port, database number, ACL user name,
password, TLS with an optional CA certificate); its host must pass the deployment's SSRF
policy. Each attempt opens one connection and closes it.

- ``redis.get`` -> ``{"key", "found", "value"}``: the string at ``key`` (``found``
  false and ``value`` null when there is none); with ``decode: json`` the text is parsed
  as JSON (text that is not JSON fails the step, kind ``redis_not_json``).
- ``redis.set`` -> ``{"key", "written"}``: stores ``value`` (text as it is, anything
  else as its JSON text), with an expiry of ``ttl`` seconds (0: none) and a condition
  (``always``; ``if_missing`` = ``NX``; ``if_exists`` = ``XX``); ``written`` is false
  when the condition kept it from being written.
- ``redis.publish`` -> ``{"channel", "receivers"}``: publishes ``message`` (text, or
  JSON text) on ``channel``; ``receivers`` is how many subscribers got it.

Errors: a wrong password or user (kind ``redis_auth``) and a command the key's type does
not allow (``redis_error``, e.g. ``WRONGTYPE``) are not retryable; a refused or lost
connection and timeouts (``redis_connect``) are.
"""

from __future__ import annotations

import json
import ssl
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import redis.exceptions
from redis.asyncio import Redis

from connectors import sdk
from connectors.builtin.databases.sql import dial_host

__all__ = ["REDIS", "connector", "get", "publish", "set_value"]


class RedisServerFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A Redis server and its login (``requirepass``, or an ACL user and password)."""

    host: Annotated[str, msgspec.Meta(title="Host", min_length=1)]
    port: Annotated[int, msgspec.Meta(title="Port", ge=1, le=65535)] = 6379
    database: Annotated[int, msgspec.Meta(title="Database number", ge=0)] = 0
    username: Annotated[
        str, msgspec.Meta(title="Username", description="Empty for the default user")
    ] = ""
    password: Annotated[str, sdk.secret("Password")] = ""
    tls: Annotated[bool, msgspec.Meta(title="Use TLS")] = False
    verify_tls: Annotated[bool, msgspec.Meta(title="Verify the TLS certificate")] = True
    ca_certificate: Annotated[
        str,
        msgspec.Meta(
            title="CA certificate (PEM)",
            description="Empty uses the system's CAs",
            extra_json_schema={"x-multiline": True},
        ),
    ] = ""


REDIS = sdk.credential_type(
    "redis",
    label="Redis server",
    kind="custom",
    fields=RedisServerFields,
    description="A Redis server to read, write and publish to",
)
CredentialField = Annotated[str, sdk.credential_meta("redis", title="Redis server")]
Key = Annotated[str, msgspec.Meta(title="Key", min_length=1)]


class GetConfig(msgspec.Struct, kw_only=True):
    """Config of ``redis.get``."""

    credential: CredentialField
    key: Key
    decode: Annotated[
        Literal["text", "json"],
        msgspec.Meta(
            title="Read the value as",
            extra_json_schema={"x-enum-labels": {"text": "Text", "json": "JSON"}},
        ),
    ] = "text"


class SetConfig(msgspec.Struct, kw_only=True):
    """Config of ``redis.set``."""

    credential: CredentialField
    key: Key
    value: Annotated[
        Any, msgspec.Meta(title="Value", description="Text, or JSON for anything else")
    ]
    ttl: Annotated[int, msgspec.Meta(title="Expires after (s)", description="0: never", ge=0)] = 0
    condition: Annotated[
        Literal["always", "if_missing", "if_exists"],
        msgspec.Meta(
            title="Write",
            extra_json_schema={
                "x-enum-labels": {
                    "always": "Always",
                    "if_missing": "Only if the key does not exist",
                    "if_exists": "Only if the key exists",
                }
            },
        ),
    ] = "always"


class PublishConfig(msgspec.Struct, kw_only=True):
    """Config of ``redis.publish``."""

    credential: CredentialField
    channel: Annotated[str, msgspec.Meta(title="Channel", min_length=1)]
    message: Annotated[
        Any, msgspec.Meta(title="Message", description="Text, or JSON for anything else")
    ]


class GetOutput(TypedDict):
    """The `key` read, whether it was `found`, and its `value` (text, or the parsed JSON
    with decode json; null when not found)."""

    key: str
    found: bool
    value: Any


class SetOutput(TypedDict):
    """The `key` written and whether it was `written` (false when the condition kept
    the value from being stored)."""

    key: str
    written: bool


class PublishOutput(TypedDict):
    """The `channel` published on and how many subscribers (`receivers`) got the
    message."""

    channel: str
    receivers: int


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


async def _client() -> Redis:
    login = sdk.credential("credential")
    port = int(login.get("port") or 6379)
    tls, verify = bool(login.get("tls")), bool(login.get("verify_tls", True))
    host = await dial_host(login["host"], port, verify_name=tls and verify)
    options: dict[str, Any] = {}
    if tls:
        options = {
            "ssl": True,
            "ssl_cert_reqs": "required" if verify else "none",
            "ssl_check_hostname": verify,
            "ssl_ca_data": login.get("ca_certificate") or None,
        }
    return Redis(
        host=host,
        port=port,
        db=int(login.get("database") or 0),
        username=login.get("username") or None,
        password=login.get("password") or None,
        socket_timeout=30,
        socket_connect_timeout=10,
        decode_responses=True,
        **options,
    )


async def _call(command: str, *args: Any, **options: Any) -> Any:
    client = await _client()
    where = f"{sdk.credential('credential')['host']}"
    try:
        return await client.execute_command(command, *args, **options)
    except redis.exceptions.AuthenticationError as err:
        raise sdk.NonRetryableError(
            f"Redis at {where} refused the login: {err}", kind="redis_auth"
        ) from None
    except redis.exceptions.ResponseError as err:
        if "NOAUTH" in str(err) or "WRONGPASS" in str(err) or "NOPERM" in str(err):
            raise sdk.NonRetryableError(f"Redis at {where}: {err}", kind="redis_auth") from None
        raise sdk.NonRetryableError(f"Redis at {where}: {err}", kind="redis_error") from None
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ssl.SSLError) as err:
        raise sdk.ActionError(
            f"cannot reach Redis at {where}: {err}", kind="redis_connect"
        ) from None
    finally:
        await client.aclose()


@sdk.action(
    "redis.get",
    label="Redis: get",
    config=GetConfig,
    category="Databases",
    icon="key-round",
    description="Read the value of a key.",
    expression_fields=("key",),
)
async def get(config: GetConfig, input: Any) -> GetOutput:
    """``GET key``."""
    value = await _call("GET", config.key)
    if value is not None and config.decode == "json":
        try:
            value = json.loads(value)
        except ValueError:
            raise sdk.NonRetryableError(
                f"the value of {config.key!r} is not JSON", kind="redis_not_json"
            ) from None
    return {"key": config.key, "found": value is not None, "value": value}


@sdk.action(
    "redis.set",
    label="Redis: set",
    config=SetConfig,
    category="Databases",
    icon="key-round",
    description="Write a key, with an expiry and a condition.",
    expression_fields=("key", "value", "ttl"),
)
async def set_value(config: SetConfig, input: Any) -> SetOutput:
    """``SET key value [EX ttl] [NX|XX]``."""
    args: list[Any] = [config.key, _text(config.value)]
    if config.ttl:
        args += ["EX", config.ttl]
    if config.condition != "always":
        args.append("NX" if config.condition == "if_missing" else "XX")
    reply = await _call("SET", *args)
    return {"key": config.key, "written": reply is not None and reply is not False}


@sdk.action(
    "redis.publish",
    label="Redis: publish",
    config=PublishConfig,
    category="Databases",
    icon="radio",
    description="Publish a message on a channel.",
    expression_fields=("channel", "message"),
)
async def publish(config: PublishConfig, input: Any) -> PublishOutput:
    """``PUBLISH channel message``."""
    receivers = await _call("PUBLISH", config.channel, _text(config.message))
    return {"channel": config.channel, "receivers": int(receivers)}


connector = sdk.Connector(
    name="redis",
    label="Redis",
    version="1.0.0",
    description="Read, write and publish to a Redis server",
    actions=[get, set_value, publish],
    credential_types=[REDIS],
    icon="database",
)
