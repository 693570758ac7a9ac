"""The rule deciding which webhook request headers are secret (docs/security.md)."""

from __future__ import annotations

from backend.engine.nodes.trigger_webhook import webhook_config
from backend.triggers.redaction import (
    REDACTED,
    auth_summary,
    redact_headers,
    secret_header_names,
    split_names,
)
from backend.triggers.webhook_input import build_run_input


def test_always_secret_whatever_the_auth() -> None:
    names = secret_header_names(webhook_config({}))
    assert {"authorization", "proxy-authorization", "cookie", "x-csrftoken"} <= names
    assert {"x-hub-signature-256", "x-hub-signature", "stripe-signature"} <= names
    assert "content-type" not in names and "x-github-event" not in names


def test_configured_auth_header_and_generic_signature_header() -> None:
    assert "x-api-key" in secret_header_names(
        webhook_config({"auth": "header", "auth_header": "X-Api-Key"})
    )
    generic = {"auth": "hmac", "hmac_preset": "generic", "hmac_header": "X-Sig"}
    assert "x-sig" in secret_header_names(webhook_config(generic))
    assert "x-signature" in secret_header_names(
        webhook_config({"auth": "hmac", "hmac_preset": "generic"})
    )
    # a header-token name is only secret when that auth is configured
    assert "x-api-key" not in secret_header_names(
        webhook_config({"auth": "none", "auth_header": "X-Api-Key"})
    )


def test_extra_names_from_setting_and_webhook() -> None:
    names = secret_header_names(
        webhook_config({"redact_headers": " X-One ,x-two,, "}), ("X-Three",)
    )
    assert {"x-one", "x-two", "x-three"} <= names
    assert "" not in names
    assert split_names(None) == frozenset()


def test_redaction_keeps_names_and_other_values() -> None:
    out = redact_headers(
        {"authorization": "Bearer t", "x-visible": "v"}, secret_header_names(webhook_config({}))
    )
    assert out == {"authorization": REDACTED, "x-visible": "v"}


def test_auth_summary_names_the_scheme_never_the_secret() -> None:
    assert auth_summary(webhook_config({})) == {"kind": "none", "verified": False}
    assert auth_summary(webhook_config({"auth": "hmac", "hmac_preset": "stripe"})) == {
        "kind": "hmac",
        "verified": True,
        "scheme": "stripe",
    }
    assert auth_summary(webhook_config({"auth": "basic", "basic_user": "ci"}))["user"] == "ci"
    assert (
        auth_summary(webhook_config({"auth": "header", "auth_header": "X-Key"}))["header"]
        == "x-key"
    )


def test_build_run_input_redacts_before_anything_else_sees_it() -> None:
    run_input = build_run_input(
        method="POST",
        path="/hooks/t",
        query=[("a", "1"), ("a", "2")],
        headers={"cookie": "railyard_session=abc; csrftoken=def", "x-tenant": "t1"},
        body={"k": 1},
        config=webhook_config({"auth": "none"}),
        redact=("X-Tenant",),
    )
    assert run_input == {
        "method": "POST",
        "path": "/hooks/t",
        "query": {"a": ["1", "2"]},
        "headers": {"cookie": REDACTED, "x-tenant": REDACTED},
        "auth": {"kind": "none", "verified": False},
        "body": {"k": 1},
        "files": [],
    }
