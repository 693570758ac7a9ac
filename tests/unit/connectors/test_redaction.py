"""One redaction rule for credential secrets in every placement (connectors/sdk/redaction.py):
what an action returns, raises and logs never holds a secret of a credential it loaded,
whether it put the secret in a cookie, a body field, a header, the query string or an
OAuth2 token (issue 29, finding 1; the end-to-end case is
tests/security/test_secrets_in_request_urls.py)."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import msgspec
import pytest

from connectors import sdk
from connectors.sdk.redaction import (
    REDACTED,
    SecretsLogFilter,
    credential_secrets,
    redact,
    secret_forms,
)
from connectors.testing import ActionTestEnvironment

SESSION = "cookie-secret-2c9e41"
FIELD = "body-field-secret-7a10"
ACCESS = "oauth-access-token-88f1"

VAULT = sdk.credential_type(
    "vault_login",
    label="Vault login",
    kind="custom",
    fields=msgspec.defstruct(
        "VaultFields",
        [
            ("account", str),
            ("session", Annotated[str, sdk.secret("Session cookie")]),
            ("field", Annotated[str, sdk.secret("Body field")]),
        ],
        kw_only=True,
    ),
)


class Config(msgspec.Struct):
    credential: Annotated[str, sdk.credential_meta("vault_login", "oauth2")]
    fail: bool = False


@sdk.action("test.echo_secrets", label="Echo", config=Config)
async def echo_secrets(config: Config, input: Any) -> dict[str, Any]:
    """Sends the secrets where a vendor wants them, and gets them echoed back."""
    cred = sdk.credential("credential")
    secret = cred.get("access_token") or cred["session"]
    request = {
        "cookie": f"session={secret}; theme=dark",
        "json": {"account": cred.get("account"), "token": cred.get("field")},
        "url": f"https://vault.example/v1?sig={secret}",
        secret: "a key named by the secret",
    }
    sdk.logger().warning("calling %s with %s", request["url"], secret)
    if config.fail:
        raise sdk.ActionError(f"refused {request['url']}", details={"sent": request})
    return {"echo": request, "list": [secret, 1, None]}


def _env() -> ActionTestEnvironment:
    return ActionTestEnvironment(
        credentials={
            "v": {"type": "vault_login", "account": "acme", "session": SESSION, "field": FIELD},
            "o": {
                "type": "oauth2",
                "kind": "oauth2",
                "authorize_url": "https://a.example/auth",
                "token_url": "https://a.example/token",
                "client_id": "cid",
                "client_secret": "client-secret-0b3d",
                "access_token": ACCESS,
            },
        },
        credential_types=[VAULT],
    )


@pytest.mark.parametrize(("credential", "secrets"), [("v", (SESSION, FIELD)), ("o", (ACCESS,))])
async def test_output_error_and_logs_hold_no_secret(
    credential: str, secrets: tuple[str, ...], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.handler.addFilter(SecretsLogFilter())
    env = _env()
    out = await env.run(echo_secrets, {"credential": credential}, None)
    with pytest.raises(sdk.ActionError) as failed:
        await env.run(echo_secrets, {"credential": credential, "fail": True}, None)
    shown = repr(out) + str(failed.value) + repr(failed.value.details) + caplog.text
    for secret in secrets:
        assert secret not in shown
    assert out["echo"]["cookie"] == f"session={REDACTED}; theme=dark"
    assert out["echo"]["url"] == f"https://vault.example/v1?sig={REDACTED}"
    assert out["list"] == [REDACTED, 1, None] and REDACTED in out["echo"]
    if credential == "v":
        assert out["echo"]["json"] == {"account": "acme", "token": REDACTED}  # not secret
    assert f"refused https://vault.example/v1?sig={REDACTED}" == str(failed.value)


def test_the_forms_of_a_secret() -> None:
    forms = secret_forms(["a/b c+d&e", "xy"])  # too short a secret is not looked for
    assert set(forms) == {"a/b c+d&e", "a%2Fb%20c%2Bd%26e", "a%2Fb+c%2Bd%26e"}
    text = "?q=a%2Fb+c%2Bd%26e&r=a%2Fb%20c%2Bd%26e raw a/b c+d&e xy"
    assert redact(text, forms) == f"?q={REDACTED}&r={REDACTED} raw {REDACTED} xy"
    assert redact({"k": ("a/b c+d&e",)}, forms) == {"k": (REDACTED,)}


def test_named_tuples_and_odd_sequences_in_exception_args_are_redacted_or_kept() -> None:
    """A library's exception may carry a named tuple (aiohttp's ConnectionKey) or a
    sequence type that cannot be built from a list: redacting never breaks on them."""
    from collections import namedtuple

    Key = namedtuple("Key", "host token")
    forms = secret_forms(["token-secret-77"])
    assert redact(Key("h", "token-secret-77"), forms) == Key("h", REDACTED)

    class Pair(tuple[str, str]):
        def __new__(cls, a: str, b: str) -> Pair:
            return super().__new__(cls, (a, b))

    odd = Pair("a", "token-secret-77")
    assert redact(odd, forms) is odd


def test_the_secrets_of_a_credential() -> None:
    basic = {"username": "ada", "password": "pw-123", "secret_fields": ["password"]}
    assert credential_secrets(basic) == ["pw-123", "YWRhOnB3LTEyMw=="]  # and Basic's form
    assert credential_secrets({"access_token": "tok-1", "refresh_token": "r"}) == ["tok-1"]
    assert credential_secrets({"api_key": "k-1234", "secret_fields": []}) == []


def test_log_lines_outside_an_attempt_pass_unchanged() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "key %s", ("k-1234",), None)
    assert SecretsLogFilter().filter(record) and record.getMessage() == "key k-1234"
