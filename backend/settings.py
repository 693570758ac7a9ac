"""Settings from environment variables (and an optional TOML file).

Every setting, its variable, type, default and meaning: docs/operations.md, "Settings"
(generated from the :class:`Settings` fields by backend/settings_table.py: `railyard
settings --markdown`). ``RAILYARD_SETTINGS_FILE`` names a TOML file with the same keys in
lower case without the ``RAILYARD_`` prefix. Environment variables win over the file.

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

from backend.setting_values import (
    SettingsError,
    check_networks,
    normalize_database_url,
    parse_role_map,
)
from designer_schema.limits import DiagramLimits


def about(meaning: str, *, default: str = "", **constraints: Any) -> msgspec.Meta:
    """Metadata of one :class:`Settings` field: ``meaning`` is its one-line description
    (docs/operations.md's settings table is generated from it by
    backend/settings_table.py), ``default`` replaces the shown default when the value
    itself would mislead (random, required); ``constraints`` are msgspec's (``ge``, ...)."""
    return msgspec.Meta(
        description=meaning, extra={"default": default} if default else None, **constraints
    )


class Settings(msgspec.Struct, kw_only=True):
    """Resolved settings. Every field is annotated with :func:`about` (its meaning) and has
    an environment variable in ``SETTING_VARIABLES`` (except ``extra``); docs/operations.md
    lists them all (``railyard settings --markdown``)."""

    database_url: Annotated[
        str,
        about(
            "PostgreSQL, `postgresql://user:pass@host:5432/db` (the asyncpg driver is used)",
            default="required",
        ),
    ] = ""
    redis_url: Annotated[
        str,
        about(
            "Redis, `redis://[:pass@]host:6379/0` (`rediss://` for TLS); with "
            "`RAILYARD_REDIS_SENTINELS` only its user, password, database and scheme are used",
            default="required",
        ),
    ] = ""
    redis_sentinels: Annotated[
        tuple[str, ...],
        about(
            "Redis Sentinel addresses `host:port,...`; when set, every process asks them "
            "for the current primary of `RAILYARD_REDIS_SENTINEL_MASTER`"
        ),
    ] = ()
    redis_sentinel_master: Annotated[
        str, about("name of the Redis primary the Sentinels watch")
    ] = "mymaster"
    redis_sentinel_password: Annotated[
        str, about("password of the Sentinels themselves (`requirepass` in sentinel.conf)")
    ] = ""
    base_url: Annotated[str, about("public URL used in webhook and run links")] = (
        "http://127.0.0.1:8000"
    )
    secret_key: Annotated[
        str,
        about(
            "CSRF secret shared by every API process; set it in production",
            default="random per process",
        ),
    ] = msgspec.field(default_factory=lambda: secrets.token_urlsafe(32))
    http_allowlist: Annotated[
        tuple[str, ...],
        about("hosts, IPs or CIDRs outbound HTTP may reach even when private"),
    ] = ()
    http_allow_private: Annotated[
        bool, about("outbound HTTP may reach private and loopback addresses (on in `railyard dev`)")
    ] = False
    webhook_max_body: Annotated[
        int, about("webhook body limit, bytes (over it: 413, no run)", ge=1)
    ] = 1024 * 1024
    lease_seconds: Annotated[
        float, about("attempt lease, seconds; a worker heartbeats every third of it", gt=0)
    ] = 60.0
    sweep_interval: Annotated[float, about("seconds between sweeper passes", gt=0)] = 5.0
    eager_runs: Annotated[
        int,
        about(
            "runs an API process executes itself at most at once: a run started by a webhook "
            "that waits for its answer, whose start leaves one action step ready, runs in the "
            "process that started it instead of going through the queue to a worker; over "
            "it, or while the API stops, the step is queued as usual; 0 turns it off (see "
            '"Eager execution")',
            ge=0,
            le=10_000,
        ),
    ] = 32
    shutdown_grace: Annotated[
        float,
        about(
            "seconds a stopping (SIGTERM) worker lets its running steps finish before it hands "
            "them back to other workers, and a stopping API lets in-flight requests finish "
            '(see "Shutdown and failover")',
            ge=0,
            le=3600,
        ),
    ] = 25.0
    shutdown_delay: Annotated[
        float,
        about(
            "seconds a stopping API keeps serving with `/health/ready` answering 503 before it "
            "stops accepting connections, so load balancers stop sending first",
            ge=0,
            le=600,
        ),
    ] = 0.0
    session_hours: Annotated[float, about("login session lifetime, hours", gt=0)] = 336.0
    secure_cookies: Annotated[bool, about("mark cookies `Secure` (behind HTTPS)")] = False
    trusted_proxies: Annotated[
        tuple[str, ...],
        about(
            "IPs or CIDRs of the reverse proxies (ingress, load balancer) whose "
            "`X-Forwarded-For` and `X-Forwarded-Proto` the API believes; empty: the "
            "connecting address is the client, whatever the headers say"
        ),
    ] = ()
    encryption_key: Annotated[
        str,
        about(
            "AES-256-GCM key of secrets at rest (credentials, webhook secrets), base64 of "
            "32 bytes (`railyard rotate-key --generate-key` prints one)",
            default="none (`railyard dev`: `<data dir>/encryption.key`)",
        ),
    ] = ""
    encryption_old_keys: Annotated[
        tuple[str, ...],
        about("old keys still readable while `railyard rotate-key` re-encrypts"),
    ] = ()
    slack_api_url: Annotated[
        str, about("base URL of Slack's Web API (`chat.postMessage` is appended)")
    ] = "https://slack.com/api"
    hubspot_api_url: Annotated[str, about("base URL of HubSpot's API")] = "https://api.hubapi.com"
    oauth2_refresh_margin: Annotated[
        float, about("seconds before expiry an OAuth2 access token is refreshed", ge=0)
    ] = 60.0
    api_db_pool_size: Annotated[
        int,
        about(
            "PostgreSQL connections each API process keeps open, shared by its requests and "
            "its eager runs (concurrent statements beyond it wait or open short-lived "
            "overflow connections); keep it above RAILYARD_EAGER_RUNS",
            ge=1,
        ),
    ] = 40
    db_pool_timeout: Annotated[
        float,
        about(
            "seconds a process waits for a PostgreSQL connection of its pool when all are in "
            "use (then the API answers 503; a worker leaves the step to the recovery sweep)",
            gt=0,
        ),
    ] = 30.0
    webhook_cache_seconds: Annotated[
        float,
        about("seconds an API process caches a webhook's workflow, version and settings", ge=0),
    ] = 2.0
    schedule_tick: Annotated[
        float,
        about("longest sleep of the schedule loop, seconds (it wakes at the next fire)", gt=0),
    ] = 1.0
    subscription_lease_seconds: Annotated[
        float,
        about(
            "seconds an events process holds a broker or email subscription without renewing "
            "it (it renews every third of it): a killed events process's subscriptions are "
            "taken over by another, or by itself restarted, within this time",
            ge=1,
            le=3600,
        ),
    ] = 30.0
    max_diagram_nodes: Annotated[int, about("nodes in one diagram", ge=1)] = 5000
    max_diagram_edges: Annotated[int, about("edges in one diagram", ge=1)] = 10000
    max_config_depth: Annotated[int, about("nesting levels of one node's config", ge=1)] = 32
    max_config_bytes: Annotated[int, about("size of one node's config as JSON, bytes", ge=1)] = (
        131072
    )
    max_json_depth: Annotated[
        int, about("nesting levels of a webhook JSON body or a run input", ge=1)
    ] = 64
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    """Every other ``RAILYARD_*`` variable and settings-file key, by :func:`setting_key`
    (where connector settings come from)."""
    payload_inline_limit: Annotated[
        int,
        about(
            "bytes of JSON above which a part of a run value is stored once by reference "
            '(docs/engine.md, "Large values")',
            ge=1024,
        ),
    ] = 256 * 1024
    redact_headers: Annotated[
        tuple[str, ...], about("extra request headers whose values webhook runs never store")
    ] = ()
    audit_retention_days: Annotated[
        int, about("days audit rows are kept; `0` keeps them forever", ge=0)
    ] = 365
    retention_runs_days: Annotated[
        int, about("days an ended run is kept with its steps and events; `0`: no age rule", ge=0)
    ] = 90
    retention_runs_max: Annotated[
        int, about("newest ended runs kept; `0`: no count rule", ge=0)
    ] = 0
    retention_payloads_days: Annotated[
        int,
        about("days the values (input, output) of an ended run are kept; `0`: no age rule", ge=0),
    ] = 0
    retention_payloads_max: Annotated[
        int, about("newest ended runs whose values are kept; `0`: no count rule", ge=0)
    ] = 0
    retention_steps_days: Annotated[
        int,
        about("days step records and attempts of an ended run are kept; `0`: no age rule", ge=0),
    ] = 0
    retention_steps_max: Annotated[
        int, about("newest ended runs whose step records are kept; `0`: no count rule", ge=0)
    ] = 0
    retention_events_days: Annotated[
        int, about("days outbox events are kept; `0`: no age rule", ge=0)
    ] = 90
    retention_events_max: Annotated[
        int, about("newest outbox events kept; `0`: no count rule", ge=0)
    ] = 0
    retention_files_days: Annotated[
        int, about("days files uploaded to webhooks are kept; `0`: no age rule", ge=0)
    ] = 90
    retention_files_max: Annotated[
        int, about("newest uploaded files kept; `0`: no count rule", ge=0)
    ] = 0
    retention_versions_days: Annotated[
        int,
        about(
            "days a published workflow version is kept (the product brief: workflow metadata "
            "5 years); versions still in use are never removed; `0`: no age rule",
            ge=0,
        ),
    ] = 1826
    retention_versions_max: Annotated[
        int, about("newest published versions kept per workflow; `0`: no count rule", ge=0)
    ] = 0
    retention_deliveries_days: Annotated[
        int, about("days event subscriptions' delivery logs are kept; `0`: no age rule", ge=0)
    ] = 30
    retention_batch: Annotated[
        int, about("rows retention removes per short transaction", ge=1, le=100000)
    ] = 500
    retention_interval: Annotated[
        float, about("seconds between two retention passes of the leading scheduler", ge=1)
    ] = 3600.0
    event_delivery_tick: Annotated[float, about("seconds between event sending passes", gt=0)] = 1.0
    event_delivery_retry_initial: Annotated[
        float, about("seconds before an outgoing event's first retry; doubles per failure", gt=0)
    ] = 30.0
    event_delivery_retry_max: Annotated[
        float, about("longest wait between two tries of an outgoing event, seconds", gt=0)
    ] = 3600.0
    event_delivery_retry_window: Annotated[
        float, about("seconds an outgoing event is retried before it is given up", gt=0)
    ] = 86400.0
    event_delivery_timeout: Annotated[float, about("seconds per outgoing event request", gt=0)] = (
        10.0
    )
    event_subscription_disable_after: Annotated[
        int, about("passes in a row with every try failed before a subscription is disabled", ge=1)
    ] = 30
    metrics_token: Annotated[
        str,
        about(
            "bearer token that may read `/metrics` besides admins (also required on the "
            "worker and scheduler probe port when set)"
        ),
    ] = ""
    otlp_endpoint: Annotated[
        str, about("OTLP/HTTP traces endpoint (`http://collector:4318/v1/traces`); empty: off")
    ] = ""
    otel_service_name: Annotated[str, about("`service.name` of exported spans")] = "railyard"
    search_backend: Annotated[
        Literal["postgres", "elasticsearch"], about("where search runs (docs/search.md)")
    ] = "postgres"
    elasticsearch_url: Annotated[str, about("Elasticsearch URL, credentials may be in it")] = ""
    search_index_prefix: Annotated[
        str,
        about(
            "prefix of the Elasticsearch indexes (`<prefix>-runs`, `-workflows`, `-audit`)",
            pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$",
        ),
    ] = "railyard"
    login_max_failures: Annotated[
        int, about("failed sign-ins to one account within the window that lock it", ge=1)
    ] = 5
    login_address_max_failures: Annotated[
        int, about("failed sign-ins from one client address within the window that lock it", ge=1)
    ] = 50
    login_window_minutes: Annotated[float, about("failure-counting window, minutes", gt=0)] = 15.0
    login_lockout_minutes: Annotated[float, about("how long a lock lasts, minutes", gt=0)] = 15.0
    password_link_hours: Annotated[
        float, about("lifetime of a password reset or invitation link, hours", gt=0)
    ] = 72.0
    oidc_issuer: Annotated[
        str, about("OpenID Connect issuer URL; empty turns single sign-on off")
    ] = ""
    oidc_client_id: Annotated[
        str,
        about(
            "client id registered at the provider (redirect URI `<base url>/login/oidc/callback`)"
        ),
    ] = ""
    oidc_client_secret: Annotated[str, about("client secret registered at the provider")] = ""
    oidc_scopes: Annotated[str, about("scopes asked for, space-separated")] = "openid email profile"
    oidc_provider_name: Annotated[
        str, about('name on the login page\'s "Sign in with ..." button')
    ] = "SSO"
    oidc_role_claim: Annotated[
        str, about("id_token claim whose value picks the role; empty: roles are set in Railyard")
    ] = ""
    oidc_role_map: Annotated[
        dict[str, str], about("claim value to role (`rail-admins=admin,devs=editor`)")
    ] = msgspec.field(default_factory=dict)
    oidc_default_role: Annotated[
        str, about("role of a new single sign-on user whose claim maps to nothing")
    ] = "viewer"
    oidc_groups_claim: Annotated[
        str, about("id_token claim listing the user's groups, stored on the user")
    ] = "groups"

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


_UNPREFIXED = ("database_url", "redis_url")
"""Settings read from the conventional unprefixed variables (``DATABASE_URL``, ``REDIS_URL``)."""

_ENV = {
    (name.upper() if name in _UNPREFIXED else f"RAILYARD_{name.upper()}"): name
    for name in Settings.__struct_fields__
    if name != "extra"
}
"""Environment variable -> setting: ``RAILYARD_<NAME>`` for every field but ``extra``."""

SETTING_VARIABLES: dict[str, str] = {name: var for var, name in _ENV.items()}
"""The environment variable of each setting (``{"base_url": "RAILYARD_BASE_URL", ...}``)."""

_LISTS = (
    "http_allowlist",
    "encryption_old_keys",
    "redact_headers",
    "redis_sentinels",
    "trusted_proxies",
)


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
    for address in settings.redis_sentinels:
        host, sep, port = address.rpartition(":")
        if not (sep and host and port.isdigit()):
            raise SettingsError(f"RAILYARD_REDIS_SENTINELS: {address!r} is not host:port")
    check_networks("RAILYARD_TRUSTED_PROXIES", settings.trusted_proxies)
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
