"""Credential types declared by connectors, and credential access inside an action.

A *credential type* names a shape of secret material (an API key, a login, OAuth2 tokens).
A connector declares the types it needs; the product stores credentials of those types
encrypted and lets users pick one in a node's config. A config field that holds a
credential id is declared with :func:`credential_meta`::

    from typing import Annotated
    import msgspec
    from connectors import sdk

    ACME_KEY = sdk.credential_type(
        "acme.api_key", label="Acme API key", kind="api_key", fields=sdk.ApiKeyFields
    )

    class Config(msgspec.Struct, kw_only=True):
        credential: Annotated[str, sdk.credential_meta("acme.api_key")]
        item: str

    @sdk.action("acme.get_item", label="Get item", config=Config)
    async def get_item(config: Config, input: object) -> dict:
        key = sdk.credential("credential")["api_key"]  # the decrypted fields
        ...

    connector = sdk.Connector(name="acme", label="Acme", version="1.0.0",
                              actions=[get_item], credential_types=[ACME_KEY])

The JSON Schema of such a field carries ``"x-credential-type": "acme.api_key"`` (or a list
of accepted types); the designer renders a picker of the user's credentials of that type.
Before the action runs, the engine resolves every credential field: it decrypts the
credential, checks its type, refreshes OAuth2 tokens that are about to expire, audits the
use, and hands the fields to :func:`credential` as a plain ``dict``. Secrets never pass
through expressions, run inputs or outputs.

Secret fields are marked with :func:`secret` (JSON Schema ``writeOnly: true``): they are
write-only in the UI and API, only a masked hint is shown after saving.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import msgspec

from .errors import ConfigError
from .schema import config_json_schema

__all__ = [
    "CREDENTIAL_KINDS",
    "ApiKeyFields",
    "BasicFields",
    "BearerFields",
    "CredentialKind",
    "CredentialType",
    "OAuth2Fields",
    "SmtpFields",
    "credential_meta",
    "credential_type",
    "credential_types_of_schema",
    "secret",
]

CredentialKind = Literal["api_key", "basic", "bearer", "smtp", "oauth2", "custom"]
CREDENTIAL_KINDS: tuple[str, ...] = ("api_key", "basic", "bearer", "smtp", "oauth2", "custom")

CREDENTIAL_SCHEMA_KEY = "x-credential-type"
"""JSON Schema keyword naming the credential type(s) a config field accepts."""


def secret(title: str, description: str = "") -> msgspec.Meta:
    """``msgspec.Meta`` for a secret credential field (JSON Schema ``writeOnly``)."""
    return msgspec.Meta(
        title=title,
        description=description,
        extra_json_schema={"writeOnly": True, "format": "password"},
    )


def credential_meta(*types: str, title: str = "Credential", description: str = "") -> msgspec.Meta:
    """``msgspec.Meta`` for a config field holding a credential id of one of ``types``.

    Use as ``credential: Annotated[str, sdk.credential_meta("smtp")]`` (or ``str | None``
    with a ``None`` default for an optional credential).
    """
    if not types:
        raise ValueError("credential_meta needs at least one credential type")
    accepted: str | list[str] = types[0] if len(types) == 1 else list(types)
    return msgspec.Meta(
        title=title,
        description=description or "Pick a saved credential; its secrets are never shown.",
        extra_json_schema={CREDENTIAL_SCHEMA_KEY: accepted},
    )


# -- standard field shapes -------------------------------------------------------------


class ApiKeyFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An API key sent in a header (default ``X-API-Key``) or a query parameter."""

    api_key: Annotated[str, secret("API key")]
    placement: Annotated[Literal["header", "query"], msgspec.Meta(title="Send the key in")] = (
        "header"
    )
    name: Annotated[
        str, msgspec.Meta(title="Header or parameter name", description="e.g. X-API-Key")
    ] = "X-API-Key"


class BasicFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """HTTP Basic authentication (RFC 7617)."""

    username: Annotated[str, msgspec.Meta(title="Username")]
    password: Annotated[str, secret("Password")]


class BearerFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A bearer token sent as ``Authorization: Bearer <token>`` (RFC 6750)."""

    token: Annotated[str, secret("Token")]


class SmtpFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An SMTP server login.

    ``security``: ``starttls`` upgrades a plain connection (port 587), ``tls`` is
    implicit TLS (port 465), ``none`` sends in clear text (local relays only).
    ``verify_tls`` false accepts self-signed certificates.
    """

    host: Annotated[str, msgspec.Meta(title="SMTP host")]
    port: Annotated[int, msgspec.Meta(title="Port", ge=1, le=65535)] = 587
    security: Annotated[Literal["starttls", "tls", "none"], msgspec.Meta(title="Security")] = (
        "starttls"
    )
    username: Annotated[str, msgspec.Meta(title="Username")] = ""
    password: Annotated[str, secret("Password")] = ""
    from_address: Annotated[
        str, msgspec.Meta(title="Default sender", description="Used when a node sets no From")
    ] = ""
    verify_tls: Annotated[bool, msgspec.Meta(title="Verify the TLS certificate")] = True


class OAuth2Fields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An OAuth2 client for the authorization-code flow (RFC 6749 §4.1).

    The tokens are not typed in: the product's *Connect* button runs the flow and stores
    them (``access_token``, ``refresh_token``, ``expires_at``) inside the credential.
    """

    authorize_url: Annotated[str, msgspec.Meta(title="Authorization URL")]
    token_url: Annotated[str, msgspec.Meta(title="Token URL")]
    client_id: Annotated[str, msgspec.Meta(title="Client id")]
    client_secret: Annotated[str, secret("Client secret")]
    scope: Annotated[str, msgspec.Meta(title="Scopes", description="Space-separated")] = ""


# -- declaration -----------------------------------------------------------------------


@dataclass(frozen=True)
class CredentialType:
    """A declared credential type.

    Attributes:
        name: unique type name, ``"smtp"`` or ``"<connector>.<name>"``.
        label: shown in pickers and on the credentials page.
        kind: one of :data:`CREDENTIAL_KINDS`; ``oauth2`` enables the Connect flow.
        fields: ``msgspec.Struct`` of what the user enters; secrets marked by :func:`secret`.
        description: one line shown on the form.
        defaults: initial form values (e.g. a provider's authorization URL).
    """

    name: str
    label: str
    kind: str
    fields: builtins.type[Any]
    description: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)

    def json_schema(self) -> dict[str, Any]:
        """JSON Schema of :attr:`fields` (refs inlined, ``defaults`` applied)."""
        schema = config_json_schema(self.fields)
        for name, value in self.defaults.items():
            prop = schema["properties"].get(name)
            if isinstance(prop, dict):
                prop["default"] = value
        return schema

    @property
    def secret_fields(self) -> tuple[str, ...]:
        """Names of write-only fields."""
        props = self.json_schema()["properties"]
        return tuple(n for n, p in props.items() if isinstance(p, dict) and p.get("writeOnly"))

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        """Check ``data`` against :attr:`fields`; returns it with defaults filled in.

        Raises :class:`~connectors.sdk.errors.ConfigError` naming the bad field.
        """
        merged = {**self.defaults, **data}
        try:
            parsed = msgspec.convert(merged, self.fields, strict=False)
        except msgspec.ValidationError as err:
            raise ConfigError(f"invalid {self.label} credential: {err}") from None
        result: dict[str, Any] = msgspec.to_builtins(parsed)
        return result


def credential_type(
    name: str,
    *,
    label: str,
    fields: builtins.type[Any],
    kind: str = "custom",
    description: str = "",
    defaults: dict[str, Any] | None = None,
) -> CredentialType:
    """Declare a credential type (see :class:`CredentialType`).

    Raises ``TypeError`` when ``fields`` is not a ``msgspec.Struct`` and ``ValueError``
    for an unknown ``kind`` or an ``oauth2`` type whose fields lack the OAuth2 client fields.
    """
    if not (isinstance(fields, type) and issubclass(fields, msgspec.Struct)):
        raise TypeError(f"credential type {name!r}: fields must be a msgspec.Struct subclass")
    if kind not in CREDENTIAL_KINDS:
        raise ValueError(f"credential type {name!r}: kind must be one of {CREDENTIAL_KINDS}")
    if kind == "oauth2":
        missing = {"authorize_url", "token_url", "client_id", "client_secret"} - set(
            fields.__struct_fields__
        )
        if missing:
            raise ValueError(f"credential type {name!r}: oauth2 fields lack {sorted(missing)}")
    return CredentialType(
        name=name,
        label=label,
        kind=kind,
        fields=fields,
        description=description,
        defaults=dict(defaults or {}),
    )


def credential_types_of_schema(schema: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """``{field: accepted credential types}`` for the top-level config fields of ``schema``."""
    out: dict[str, tuple[str, ...]] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        accepted = prop.get(CREDENTIAL_SCHEMA_KEY)
        if accepted is None:
            for option in prop.get("anyOf") or ():
                if isinstance(option, dict) and CREDENTIAL_SCHEMA_KEY in option:
                    accepted = option[CREDENTIAL_SCHEMA_KEY]
        if isinstance(accepted, str):
            out[name] = (accepted,)
        elif isinstance(accepted, list) and accepted:
            out[name] = tuple(str(a) for a in accepted)
    return out
