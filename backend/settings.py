"""Settings from environment variables (and an optional TOML file).

| variable | meaning | default |
| --- | --- | --- |
| ``DATABASE_URL`` | ``postgresql+asyncpg://user:pass@host:port/db`` | required outside ``railyard dev`` |
| ``REDIS_URL`` | ``redis://host:port/db`` | required outside ``railyard dev`` |
| ``RAILYARD_BASE_URL`` | public URL used in webhook links | ``http://127.0.0.1:8000`` |
| ``RAILYARD_SECRET_KEY`` | secret for CSRF tokens | random per process (dev only) |
| ``RAILYARD_SETTINGS_FILE`` | TOML file with the same keys in lower case | none |
| ``RAILYARD_HTTP_ALLOWLIST`` | comma-separated hosts/IPs/CIDRs outbound HTTP may reach even when private | empty |
| ``RAILYARD_HTTP_ALLOW_PRIVATE`` | ``1`` lets outbound HTTP reach private/loopback addresses | ``0`` |
| ``RAILYARD_WEBHOOK_MAX_BODY`` | webhook body limit in bytes | ``1048576`` (1 MiB) |
| ``RAILYARD_LEASE_SECONDS`` | attempt lease before the sweeper expires it | ``60`` |
| ``RAILYARD_SWEEP_INTERVAL`` | seconds between sweeper passes | ``5`` |
| ``RAILYARD_SESSION_HOURS`` | login session lifetime | ``336`` (14 days) |
| ``RAILYARD_SECURE_COOKIES`` | ``1`` marks cookies Secure (behind HTTPS) | ``0`` |
| ``RAILYARD_ENCRYPTION_KEY`` | base64 of 32 random bytes: the AES-256-GCM key credentials and webhook secrets are encrypted with (``railyard rotate-key --generate-key`` prints one) | generated into ``<data dir>/encryption.key`` by ``railyard dev``; required for credentials and webhook secrets otherwise |
| ``RAILYARD_ENCRYPTION_OLD_KEYS`` | comma-separated old keys still readable during a rotation (see ``railyard rotate-key``) | empty |
| ``RAILYARD_SLACK_API_URL`` | base URL of Slack's Web API (``chat.postMessage`` is appended) | ``https://slack.com/api`` |
| ``RAILYARD_HUBSPOT_API_URL`` | base URL of HubSpot's API | ``https://api.hubapi.com`` |
| ``RAILYARD_OAUTH2_REFRESH_MARGIN`` | seconds before expiry an OAuth2 access token is refreshed when an action asks for it | ``60`` |
| ``RAILYARD_WEBHOOK_CACHE_SECONDS`` | how long an API process caches a webhook's workflow, version and settings | ``2`` |
| ``RAILYARD_API_DB_POOL_SIZE`` | PostgreSQL connections an API process keeps open (requests beyond them open their own) | ``20`` |
| ``RAILYARD_SCHEDULE_TICK`` | longest sleep of the schedule loop, seconds (it wakes at the next fire time) | ``1`` |
| ``RAILYARD_LOGIN_MAX_FAILURES`` | failed sign-ins to one account within the window that lock it | ``5`` |
| ``RAILYARD_LOGIN_ADDRESS_MAX_FAILURES`` | failed sign-ins from one client address within the window that lock it | ``50`` |
| ``RAILYARD_LOGIN_WINDOW_MINUTES`` | the failure-counting window | ``15`` |
| ``RAILYARD_LOGIN_LOCKOUT_MINUTES`` | how long a lock lasts | ``15`` |
| ``RAILYARD_PASSWORD_LINK_HOURS`` | lifetime of a password reset or invitation link | ``72`` |
| ``RAILYARD_OIDC_ISSUER`` | OpenID Connect issuer URL (discovery at ``<issuer>/.well-known/openid-configuration``); empty turns single sign-on off | empty |
| ``RAILYARD_OIDC_CLIENT_ID`` / ``RAILYARD_OIDC_CLIENT_SECRET`` | the client registered at the provider (redirect URI ``<base url>/login/oidc/callback``) | empty |
| ``RAILYARD_OIDC_SCOPES`` | scopes asked for | ``openid email profile`` |
| ``RAILYARD_OIDC_PROVIDER_NAME`` | name on the login page's "Sign in with ..." button | ``SSO`` |
| ``RAILYARD_OIDC_ROLE_CLAIM`` | id_token claim whose value (string or list) picks the role; empty: roles are managed in Railyard | empty |
| ``RAILYARD_OIDC_ROLE_MAP`` | claim value to role, ``value=role`` pairs separated by commas (``rail-admins=admin,devs=editor``) | empty |
| ``RAILYARD_OIDC_DEFAULT_ROLE`` | role of a new single sign-on user (and of one whose claim maps to nothing) | ``viewer`` |
| ``RAILYARD_OIDC_GROUPS_CLAIM`` | id_token claim listing the user's groups, stored on the user | ``groups`` |
| ``RAILYARD_PAYLOAD_INLINE_LIMIT`` | bytes of JSON text above which a part of a run value (input, output, error) is stored once by reference and shown as a preview with a download link (docs/engine.md, "Large values"); at least 1024 | ``262144`` (256 KiB) |
| ``RAILYARD_REDACT_HEADERS`` | comma-separated extra request header names whose values webhook runs never store (docs/security.md, "Secrets in run data") | empty |
| ``RAILYARD_AUDIT_RETENTION_DAYS`` | audit log rows older than this many days are deleted by the scheduler's sweeper; ``0`` keeps them forever | ``365`` |
| ``RAILYARD_RETENTION_<CLASS>_DAYS`` / ``..._MAX`` | retention per data class (``RUNS``, ``PAYLOADS``, ``STEPS``, ``EVENTS``, ``FILES``): rows older than the days, or beyond the newest MAX rows, are removed by the scheduler (docs/operations.md, "Retention"); ``0`` turns a rule off | runs 90 days, events 90 days, files 90 days, the rest off |
| ``RAILYARD_RETENTION_BATCH`` | rows removed per short transaction | ``500`` |
| ``RAILYARD_RETENTION_INTERVAL`` | seconds between retention passes of the scheduler | ``3600`` |
| ``RAILYARD_METRICS_TOKEN`` | bearer token that may read ``/metrics`` (besides admins); also required on the worker/scheduler probe port's ``/metrics`` when set | empty |
| ``RAILYARD_OTLP_ENDPOINT`` | OTLP/HTTP traces endpoint (``http://collector:4318/v1/traces``); empty: tracing off | empty |
| ``RAILYARD_OTEL_SERVICE_NAME`` | ``service.name`` of exported spans | ``railyard`` |
| ``RAILYARD_SEARCH_BACKEND`` | ``postgres`` (the tables themselves) or ``elasticsearch`` (an index fed by ``railyard search-indexer``; docs/search.md) | ``postgres`` |
| ``RAILYARD_ELASTICSEARCH_URL`` | Elasticsearch URL (credentials may be in it: ``https://user:pass@host:9200``) | empty |
| ``RAILYARD_SEARCH_INDEX_PREFIX`` | prefix of the Elasticsearch index names (``<prefix>-runs``, ``-workflows``, ``-audit``) | ``railyard`` |
| ``RAILYARD_MAX_DIAGRAM_NODES`` | nodes in one diagram (draft, compile) | ``5000`` |
| ``RAILYARD_MAX_DIAGRAM_EDGES`` | edges in one diagram | ``10000`` |
| ``RAILYARD_MAX_CONFIG_DEPTH`` | nesting levels of one node's config | ``32`` |
| ``RAILYARD_MAX_CONFIG_BYTES`` | size of one node's config as JSON, bytes | ``131072`` (128 KiB) |
| ``RAILYARD_MAX_JSON_DEPTH`` | nesting levels of a webhook JSON body or a run input | ``64`` |

Environment variables win over the file.

Connector settings (what a connector reads with ``sdk.setting(name)``, e.g.
``sdk.setting("acme.api_url", default)``), for built-in and installed plugins alike: the
environment variable ``RAILYARD_`` + the name in upper case with every character other
than a letter or digit replaced by ``_`` (``acme.api_url`` -> ``RAILYARD_ACME_API_URL``),
or in the settings file either that variable's name in lower case without the prefix
(``acme_api_url = "..."``) or the dotted name itself (``[acme]`` table, key ``api_url``).
The environment wins over the file, the file over the connector's default.
"""

from __future__ import annotations

import os
import re
import secrets
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from designer_schema.limits import DiagramLimits


class SettingsError(Exception):
    """A required setting is missing or malformed."""


class Settings(msgspec.Struct, kw_only=True):
    """Resolved settings; see the module docstring for each field's variable."""

    database_url: str = ""
    redis_url: str = ""
    base_url: str = "http://127.0.0.1:8000"
    secret_key: str = msgspec.field(default_factory=lambda: secrets.token_urlsafe(32))
    http_allowlist: tuple[str, ...] = ()
    http_allow_private: bool = False
    webhook_max_body: int = 1024 * 1024
    lease_seconds: float = 60.0
    sweep_interval: float = 5.0
    session_hours: float = 336.0
    secure_cookies: bool = False
    encryption_key: str = ""
    encryption_old_keys: tuple[str, ...] = ()
    slack_api_url: str = "https://slack.com/api"
    hubspot_api_url: str = "https://api.hubapi.com"
    oauth2_refresh_margin: float = 60.0
    webhook_cache_seconds: float = 2.0
    api_db_pool_size: int = 20
    schedule_tick: float = 1.0
    max_diagram_nodes: int = 5000
    max_diagram_edges: int = 10000
    max_config_depth: int = 32
    max_config_bytes: int = 131072
    max_json_depth: int = 64
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    """Every other ``RAILYARD_*`` variable and settings-file key, by :func:`setting_key`
    (where connector settings come from)."""
    payload_inline_limit: int = 256 * 1024
    redact_headers: tuple[str, ...] = ()
    audit_retention_days: Annotated[int, msgspec.Meta(ge=0)] = 365
    # retention per data class (backend/services/retention.py): days (0 = no age limit) and
    # the newest rows kept (0 = no count limit)
    retention_runs_days: Annotated[int, msgspec.Meta(ge=0)] = 90
    retention_runs_max: Annotated[int, msgspec.Meta(ge=0)] = 0
    retention_payloads_days: Annotated[int, msgspec.Meta(ge=0)] = 0
    retention_payloads_max: Annotated[int, msgspec.Meta(ge=0)] = 0
    retention_steps_days: Annotated[int, msgspec.Meta(ge=0)] = 0
    retention_steps_max: Annotated[int, msgspec.Meta(ge=0)] = 0
    retention_events_days: Annotated[int, msgspec.Meta(ge=0)] = 90
    retention_events_max: Annotated[int, msgspec.Meta(ge=0)] = 0
    retention_files_days: Annotated[int, msgspec.Meta(ge=0)] = 90
    retention_files_max: Annotated[int, msgspec.Meta(ge=0)] = 0
    retention_batch: Annotated[int, msgspec.Meta(ge=1, le=100000)] = 500
    retention_interval: Annotated[float, msgspec.Meta(ge=1)] = 3600.0
    metrics_token: str = ""
    otlp_endpoint: str = ""
    otel_service_name: str = "railyard"
    search_backend: Literal["postgres", "elasticsearch"] = "postgres"
    elasticsearch_url: str = ""
    search_index_prefix: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")] = (
        "railyard"
    )

    login_max_failures: int = 5
    login_address_max_failures: int = 50
    login_window_minutes: float = 15.0
    login_lockout_minutes: float = 15.0
    password_link_hours: float = 72.0
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = ""
    oidc_scopes: str = "openid email profile"
    oidc_provider_name: str = "SSO"
    oidc_role_claim: str = ""
    oidc_role_map: dict[str, str] = msgspec.field(default_factory=dict)
    oidc_default_role: str = "viewer"
    oidc_groups_claim: str = "groups"

    @property
    def oidc_enabled(self) -> bool:
        """True when single sign-on is configured (issuer and client id set)."""
        return bool(self.oidc_issuer and self.oidc_client_id)

    def connector_settings(self) -> ConnectorSettings:
        """What connectors read through ``sdk.setting(name)``; see the module docstring."""
        return ConnectorSettings(
            self.extra,
            {
                "slack.api_url": self.slack_api_url.rstrip("/"),
                "hubspot.api_url": self.hubspot_api_url.rstrip("/"),
            },
        )

    def diagram_limits(self) -> DiagramLimits:
        """The diagram size limits of this installation."""
        return DiagramLimits(
            max_nodes=self.max_diagram_nodes,
            max_edges=self.max_diagram_edges,
            max_config_depth=self.max_config_depth,
            max_config_bytes=self.max_config_bytes,
        )

    def require_services(self, *, redis: bool = True) -> None:
        """Raise :class:`SettingsError` unless the database (and Redis) URLs are set."""
        names: tuple[str, ...] = ("database_url", "redis_url") if redis else ("database_url",)
        missing = [n for n in names if not getattr(self, n)]
        if missing:
            listed = ", ".join(n.upper() for n in missing)
            raise SettingsError(f"{listed} must be set (or use `railyard dev`)")


def setting_key(name: str) -> str:
    """The lookup key of a connector setting name, an environment variable (without
    ``RAILYARD_``) or a flattened settings-file key: lower case, every character other
    than an ASCII letter or digit replaced by ``_`` (``acme.api-url`` -> ``acme_api_url``)."""
    return re.sub(r"[^a-z0-9]", "_", name.lower())


class ConnectorSettings(Mapping[str, Any]):
    """Read-only mapping ``setting name -> value`` behind ``sdk.setting(name, default)``.

    ``builtin`` holds the built-in connectors' settings (typed fields of
    :class:`Settings`); any other name is looked up by :func:`setting_key` in ``extra``
    (environment over file). Iterating lists only the built-ins and the names seen in
    ``extra`` in their key form.
    """

    def __init__(self, extra: dict[str, Any], builtin: dict[str, Any]) -> None:
        self._extra = extra
        self._builtin = builtin

    def __getitem__(self, name: str) -> Any:
        if name in self._builtin:
            return self._builtin[name]
        return self._extra[setting_key(name)]

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._builtin), **dict.fromkeys(self._extra)})

    def __len__(self) -> int:
        return len(set(self._builtin) | set(self._extra))


_ENV = {
    "DATABASE_URL": "database_url",
    "REDIS_URL": "redis_url",
    "RAILYARD_BASE_URL": "base_url",
    "RAILYARD_SECRET_KEY": "secret_key",
    "RAILYARD_HTTP_ALLOWLIST": "http_allowlist",
    "RAILYARD_HTTP_ALLOW_PRIVATE": "http_allow_private",
    "RAILYARD_WEBHOOK_MAX_BODY": "webhook_max_body",
    "RAILYARD_LEASE_SECONDS": "lease_seconds",
    "RAILYARD_SWEEP_INTERVAL": "sweep_interval",
    "RAILYARD_SESSION_HOURS": "session_hours",
    "RAILYARD_SECURE_COOKIES": "secure_cookies",
    "RAILYARD_ENCRYPTION_KEY": "encryption_key",
    "RAILYARD_ENCRYPTION_OLD_KEYS": "encryption_old_keys",
    "RAILYARD_SLACK_API_URL": "slack_api_url",
    "RAILYARD_HUBSPOT_API_URL": "hubspot_api_url",
    "RAILYARD_OAUTH2_REFRESH_MARGIN": "oauth2_refresh_margin",
    "RAILYARD_WEBHOOK_CACHE_SECONDS": "webhook_cache_seconds",
    "RAILYARD_API_DB_POOL_SIZE": "api_db_pool_size",
    "RAILYARD_SCHEDULE_TICK": "schedule_tick",
    "RAILYARD_LOGIN_MAX_FAILURES": "login_max_failures",
    "RAILYARD_LOGIN_ADDRESS_MAX_FAILURES": "login_address_max_failures",
    "RAILYARD_LOGIN_WINDOW_MINUTES": "login_window_minutes",
    "RAILYARD_LOGIN_LOCKOUT_MINUTES": "login_lockout_minutes",
    "RAILYARD_PASSWORD_LINK_HOURS": "password_link_hours",
    "RAILYARD_OIDC_ISSUER": "oidc_issuer",
    "RAILYARD_OIDC_CLIENT_ID": "oidc_client_id",
    "RAILYARD_OIDC_CLIENT_SECRET": "oidc_client_secret",
    "RAILYARD_OIDC_SCOPES": "oidc_scopes",
    "RAILYARD_OIDC_PROVIDER_NAME": "oidc_provider_name",
    "RAILYARD_OIDC_ROLE_CLAIM": "oidc_role_claim",
    "RAILYARD_OIDC_ROLE_MAP": "oidc_role_map",
    "RAILYARD_OIDC_DEFAULT_ROLE": "oidc_default_role",
    "RAILYARD_OIDC_GROUPS_CLAIM": "oidc_groups_claim",
    "RAILYARD_PAYLOAD_INLINE_LIMIT": "payload_inline_limit",
    "RAILYARD_REDACT_HEADERS": "redact_headers",
    "RAILYARD_AUDIT_RETENTION_DAYS": "audit_retention_days",
    "RAILYARD_RETENTION_RUNS_DAYS": "retention_runs_days",
    "RAILYARD_RETENTION_RUNS_MAX": "retention_runs_max",
    "RAILYARD_RETENTION_PAYLOADS_DAYS": "retention_payloads_days",
    "RAILYARD_RETENTION_PAYLOADS_MAX": "retention_payloads_max",
    "RAILYARD_RETENTION_STEPS_DAYS": "retention_steps_days",
    "RAILYARD_RETENTION_STEPS_MAX": "retention_steps_max",
    "RAILYARD_RETENTION_EVENTS_DAYS": "retention_events_days",
    "RAILYARD_RETENTION_EVENTS_MAX": "retention_events_max",
    "RAILYARD_RETENTION_FILES_DAYS": "retention_files_days",
    "RAILYARD_RETENTION_FILES_MAX": "retention_files_max",
    "RAILYARD_RETENTION_BATCH": "retention_batch",
    "RAILYARD_RETENTION_INTERVAL": "retention_interval",
    "RAILYARD_METRICS_TOKEN": "metrics_token",
    "RAILYARD_OTLP_ENDPOINT": "otlp_endpoint",
    "RAILYARD_OTEL_SERVICE_NAME": "otel_service_name",
    "RAILYARD_SEARCH_BACKEND": "search_backend",
    "RAILYARD_ELASTICSEARCH_URL": "elasticsearch_url",
    "RAILYARD_SEARCH_INDEX_PREFIX": "search_index_prefix",
    "RAILYARD_MAX_DIAGRAM_NODES": "max_diagram_nodes",
    "RAILYARD_MAX_DIAGRAM_EDGES": "max_diagram_edges",
    "RAILYARD_MAX_CONFIG_DEPTH": "max_config_depth",
    "RAILYARD_MAX_CONFIG_BYTES": "max_config_bytes",
    "RAILYARD_MAX_JSON_DEPTH": "max_json_depth",
}

SETTING_VARIABLES: dict[str, str] = {name: var for var, name in _ENV.items()}
"""The environment variable of each setting (``{"base_url": "RAILYARD_BASE_URL", ...}``)."""

_LISTS = ("http_allowlist", "encryption_old_keys", "redact_headers")


def load_settings(environ: dict[str, str] | None = None, **overrides: object) -> Settings:
    """Build :class:`Settings` from the settings file, the environment and ``overrides``.

    Raises :class:`SettingsError` naming the variable when a value has the wrong type.
    """
    env = dict(os.environ if environ is None else environ)
    raw: dict[str, object] = {}
    path = env.get("RAILYARD_SETTINGS_FILE")
    if path:
        try:
            raw.update(tomllib.loads(Path(path).read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise SettingsError(f"cannot read settings file {path}: {exc}") from exc
    for var, name in _ENV.items():
        if var in env and env[var] != "":
            value: object = env[var]
            if name in _LISTS:
                value = tuple(p.strip() for p in str(value).split(",") if p.strip())
            elif name in ("http_allow_private", "secure_cookies"):
                value = str(value).lower() in ("1", "true", "yes", "on")
            elif name == "oidc_role_map":
                value = parse_role_map(str(value))
            raw[name] = value
    raw["extra"] = _extra_settings(raw, env)
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        settings = msgspec.convert(raw, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(f"invalid setting: {exc}") from exc
    settings.database_url = normalize_database_url(settings.database_url)
    if settings.payload_inline_limit < 1024:
        raise SettingsError("RAILYARD_PAYLOAD_INLINE_LIMIT must be at least 1024 (bytes)")
    return settings


def _extra_settings(raw: dict[str, object], env: dict[str, str]) -> dict[str, Any]:
    """File keys and ``RAILYARD_*`` variables that are not :class:`Settings` fields, by
    :func:`setting_key` (nested file tables flattened: ``[acme] api_url`` ->
    ``acme_api_url``); the environment wins."""
    fields = set(Settings.__struct_fields__)
    extra: dict[str, Any] = {}

    def flatten(prefix: str, table: dict[str, object]) -> None:
        for key, value in table.items():
            name = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict):
                flatten(name, value)
            elif prefix or key not in fields:
                extra[setting_key(name)] = value

    flatten("", raw)
    for var, value in env.items():
        if var.startswith("RAILYARD_") and var not in _ENV and value != "":
            extra[setting_key(var.removeprefix("RAILYARD_"))] = value
    return extra


def parse_role_map(value: str) -> dict[str, str]:
    """``"rail-admins=admin, devs=editor"`` -> ``{"rail-admins": "admin", "devs": "editor"}``.

    Raises :class:`SettingsError` for a pair without ``=``.
    """
    pairs: dict[str, str] = {}
    for part in value.split(","):
        if not part.strip():
            continue
        claim, sep, role = part.rpartition("=")
        if not sep or not claim.strip() or not role.strip():
            raise SettingsError(
                f"RAILYARD_OIDC_ROLE_MAP: {part.strip()!r} is not a claim_value=role pair"
            )
        pairs[claim.strip()] = role.strip()
    return pairs


def normalize_database_url(url: str) -> str:
    """Use the asyncpg driver for ``postgres://`` and ``postgresql://`` URLs.

    Raises :class:`SettingsError` for another database or driver.
    """
    if not url:
        return url
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise SettingsError("DATABASE_URL must look like postgresql://user:pass@host:5432/db")
    if scheme in ("postgres", "postgresql", "postgresql+asyncpg"):
        return f"postgresql+asyncpg://{rest}"
    raise SettingsError(
        f"DATABASE_URL scheme {scheme!r} is not supported: use postgresql:// (asyncpg driver)"
    )
