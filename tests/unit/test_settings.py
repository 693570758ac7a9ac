"""Settings: environment parsing and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.settings import SettingsError, load_settings, setting_key


def test_database_url_gets_the_asyncpg_driver() -> None:
    s = load_settings(
        environ={"DATABASE_URL": "postgresql://u:p@db:5432/x", "REDIS_URL": "redis://r"}
    )
    assert s.database_url == "postgresql+asyncpg://u:p@db:5432/x"
    s = load_settings(environ={"DATABASE_URL": "postgres://u@db/x"})
    assert s.database_url == "postgresql+asyncpg://u@db/x"


def test_unsupported_database_is_refused_with_the_variable_named() -> None:
    with pytest.raises(SettingsError, match="DATABASE_URL"):
        load_settings(environ={"DATABASE_URL": "mysql://u@db/x"})


def test_missing_services_are_named() -> None:
    with pytest.raises(SettingsError, match="DATABASE_URL, REDIS_URL"):
        load_settings(environ={}).require_services()
    load_settings(environ={"DATABASE_URL": "postgresql://db/x"}).require_services(redis=False)


def test_lists_and_flags_parse() -> None:
    s = load_settings(
        environ={
            "RAILYARD_HTTP_ALLOWLIST": "10.0.0.0/8, api.local",
            "RAILYARD_HTTP_ALLOW_PRIVATE": "yes",
        }
    )
    assert s.http_allowlist == ("10.0.0.0/8", "api.local")
    assert s.http_allow_private is True
    with pytest.raises(SettingsError, match="invalid setting"):
        load_settings(environ={"RAILYARD_WEBHOOK_MAX_BODY": "lots"})


def test_any_connector_setting_comes_from_the_environment_or_the_file(tmp_path: Path) -> None:
    settings_file = tmp_path / "railyard.toml"
    settings_file.write_text(
        'acme_api_url = "http://file-flat"\n'
        '[example]\napi_url = "http://file-table"\nretries = 3\n'
        '[my-crm]\n"base.url" = "http://crm"\n'
    )
    env = {"RAILYARD_SETTINGS_FILE": str(settings_file), "RAILYARD_SLACK_API_URL": "http://s/"}
    connector = load_settings(env).connector_settings()
    assert connector["example.api_url"] == "http://file-table"
    assert connector.get("example.retries") == 3
    assert connector["acme.api_url"] == "http://file-flat"
    assert connector["my-crm.base.url"] == "http://crm"
    assert connector["slack.api_url"] == "http://s"  # built-ins keep their typed fields
    assert connector.get("example.missing", "default") == "default"

    env["RAILYARD_EXAMPLE_API_URL"] = "http://env"  # the environment wins over the file
    assert load_settings(env).connector_settings()["example.api_url"] == "http://env"
    assert setting_key("my-crm.base.url") == "my_crm_base_url"


def test_oidc_settings_and_role_map_parse() -> None:
    s = load_settings(
        environ={
            "RAILYARD_OIDC_ISSUER": "https://idp.example.com/realms/rail",
            "RAILYARD_OIDC_CLIENT_ID": "railyard",
            "RAILYARD_OIDC_ROLE_MAP": " rail-admins=admin, devs = editor,,",
            "RAILYARD_LOGIN_MAX_FAILURES": "7",
        }
    )
    assert s.oidc_enabled and s.oidc_scopes == "openid email profile"
    assert s.oidc_role_map == {"rail-admins": "admin", "devs": "editor"}
    assert s.login_max_failures == 7 and s.login_address_max_failures == 50
    assert not load_settings(environ={"RAILYARD_OIDC_ISSUER": "https://idp"}).oidc_enabled
    with pytest.raises(SettingsError, match="RAILYARD_OIDC_ROLE_MAP"):
        load_settings(environ={"RAILYARD_OIDC_ROLE_MAP": "admins"})
