"""A local OAuth2 provider built with authlib's ``AuthorizationServer`` on http.server.

Implements RFC 6749 authorization code (with PKCE, RFC 7636) and refresh token grants:

- ``GET /authorize?response_type=code&client_id&redirect_uri&state&code_challenge...``:
  auto-approves for the single user and answers ``302 redirect_uri?code=&state=``
  (a test fetches it without following, then calls the app's callback itself);
- ``POST /token`` (client_secret_basic or client_secret_post): issues bearer tokens
  that expire after ``expires_in`` seconds, with refresh tokens (rotated on refresh);
- ``GET /me`` with ``Authorization: Bearer <access token>``: ``{"user": ...}`` or 401.

It is also an OpenID Connect provider (authlib's ``OpenIDCode`` extension): when the scope
has ``openid`` the token response carries an RS256 ``id_token`` (``iss`` = the base URL,
``aud`` = the client id, the authorization request's ``nonce``, and ``Provider.claims``),
``GET /.well-known/openid-configuration`` is the discovery document and ``GET /jwks`` the
public key set. For refusal tests, ``Provider.id_token_changes`` overrides claims of the
next id_tokens after authlib built them (``{"aud": "other"}``, ``{"exp": 0}``, ...), and
``Provider.sign_with_unknown_key`` signs them with a key that is not in the JWKS.

Listens on 127.0.0.1 (free port) in a thread; ``AUTHLIB_INSECURE_TRANSPORT`` is set
because the tests speak plain HTTP to it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from authlib.oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import OAuth2Request
from authlib.oauth2.rfc6749.errors import OAuth2Error
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, RefreshTokenGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core.grants import OpenIDCode
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from tests.local_http import LocalHTTPServer

os.environ.setdefault("AUTHLIB_INSECURE_TRANSPORT", "1")


@dataclass
class Client:
    client_id: str
    client_secret: str
    redirect_uris: list[str]
    scope: str = "read write"

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        if not scope:
            return ""
        allowed = set(self.scope.split())
        return " ".join(s for s in scope.split() if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return secrets.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    code_challenge: str | None
    code_challenge_method: str | None
    nonce: str | None = None
    auth_time: int = 0

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


@dataclass
class Token:
    client_id: str
    access_token: str
    refresh_token: str | None
    scope: str
    expires_at: float
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope


@dataclass
class Provider:
    """State of the provider; ``token_requests`` counts calls per grant type."""

    expires_in: int = 3600
    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, Code] = field(default_factory=dict)
    tokens: list[Token] = field(default_factory=list)
    token_requests: list[str] = field(default_factory=list)
    user: str = "ada"
    issuer: str = ""
    claims: dict[str, Any] = field(
        default_factory=lambda: {
            "sub": "ada-0001",
            "email": "ada@example.com",
            "email_verified": True,
            "name": "Ada Lovelace",
        }
    )
    id_token_changes: dict[str, Any] = field(default_factory=dict)
    sign_with_unknown_key: bool = False
    key: RSAKey = field(
        default_factory=lambda: RSAKey.generate_key(
            2048, parameters={"kid": "fake-1", "use": "sig", "alg": "RS256"}, private=True
        )
    )
    jwks_requests: int = 0


class _Request(OAuth2Request):
    def __init__(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        values: dict[str, str],
        args: dict[str, str],
        form: dict[str, str],
    ) -> None:
        super().__init__(method, url, headers=headers)
        self.payload = BasicOAuth2Payload(values)
        self._args = args
        self._form = form

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _Server(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, provider: Provider) -> None:
        super().__init__(scopes_supported=["read", "write", "openid", "email", "profile", "groups"])
        self.provider = provider

    def query_client(self, client_id: str) -> Client | None:
        return self.provider.clients.get(client_id)

    def save_token(self, token: dict[str, Any], request: Any) -> None:
        self.provider.tokens.append(
            Token(
                client_id=request.client.client_id,
                access_token=token["access_token"],
                refresh_token=token.get("refresh_token"),
                scope=token.get("scope", ""),
                expires_at=time.time() + token["expires_in"],
            )
        )

    def create_oauth2_request(self, request: Any) -> Any:
        return request

    def create_json_request(self, request: Any) -> Any:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> Any:
        return status, body, headers

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass


def _build(provider: Provider) -> _Server:
    server = _Server(provider)

    class CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

        def save_authorization_code(self, code: str, request: Any) -> None:
            data = request.payload.data
            provider.codes[code] = Code(
                code=code,
                client_id=request.client.client_id,
                redirect_uri=data.get("redirect_uri", ""),
                scope=request.payload.scope or "",
                code_challenge=data.get("code_challenge"),
                code_challenge_method=data.get("code_challenge_method"),
                nonce=data.get("nonce"),
                auth_time=int(time.time()),
            )

        def query_authorization_code(self, code: str, client: Client) -> Code | None:
            found = provider.codes.get(code)
            return found if found and found.client_id == client.client_id else None

        def delete_authorization_code(self, authorization_code: Code) -> None:
            provider.codes.pop(authorization_code.code, None)

        def authenticate_user(self, authorization_code: Code) -> str:
            return provider.user

    class Refresh(RefreshTokenGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]
        INCLUDE_NEW_REFRESH_TOKEN = True

        def authenticate_refresh_token(self, refresh_token: str) -> Token | None:
            return next(
                (t for t in provider.tokens if t.refresh_token == refresh_token and not t.revoked),
                None,
            )

        def authenticate_user(self, credential: Token) -> str:
            return provider.user

        def revoke_old_credential(self, credential: Token) -> None:
            credential.revoked = True

    class OpenID(OpenIDCode):  # type: ignore[misc]
        def resolve_client_private_key(self, client: Client) -> RSAKey:
            return provider.key

        def get_client_algorithm(self, client: Client) -> str:
            return "RS256"

        def get_encode_header(self, client: Client) -> dict[str, str]:
            return {"alg": "RS256", "kid": provider.key.kid or ""}

        def get_client_claims(self, client: Client) -> dict[str, Any]:
            return {"iss": provider.issuer, "aud": [client.client_id]}

        def exists_nonce(self, nonce: str, request: Any) -> bool:
            return any(c.nonce == nonce for c in provider.codes.values())

        def generate_user_info(self, user: str, scope: str) -> dict[str, Any]:
            return dict(provider.claims)

        def encode_id_token(self, token: dict[str, Any], request: Any) -> str:
            encoded: str = super().encode_id_token(token, request)
            if not provider.id_token_changes and not provider.sign_with_unknown_key:
                return encoded
            claims = jwt.decode(encoded, provider.key).claims
            claims.update(provider.id_token_changes)
            key = provider.key
            if provider.sign_with_unknown_key:
                key = RSAKey.generate_key(2048, parameters={"kid": "fake-1"}, private=True)
            return jwt.encode({"alg": "RS256", "kid": "fake-1"}, claims, key)

    server.register_grant(CodeGrant, [CodeChallenge(required=True), OpenID(require_nonce=True)])
    server.register_grant(Refresh)
    server.register_token_generator(
        "default",
        BearerTokenGenerator(
            access_token_generator=lambda **_: "at-" + secrets.token_urlsafe(16),
            refresh_token_generator=lambda **_: "rt-" + secrets.token_urlsafe(16),
            expires_generator=lambda client, grant_type: provider.expires_in,
        ),
    )
    return server


class OAuth2Provider:
    """The provider over HTTP. ``url`` is its base URL; ``state`` its :class:`Provider`."""

    def __init__(self, expires_in: int = 3600) -> None:
        self.state = Provider(expires_in=expires_in)
        self.auth = _build(self.state)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _reply(self, status: int, body: Any, headers: Any) -> None:
                payload = (
                    body
                    if isinstance(body, bytes)
                    else (json.dumps(body).encode() if not isinstance(body, str) else body.encode())
                )
                self.send_response(status)
                names = set()
                for name, value in headers or []:
                    names.add(name.lower())
                    self.send_header(name, value)
                if "content-type" not in names:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _request(self) -> _Request:
                parts = urlsplit(self.path)
                args = dict(parse_qsl(parts.query))
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode() if length else ""
                form = dict(parse_qsl(raw))
                url = f"{outer.url}{self.path}"
                headers = {k: v for k, v in self.headers.items()}
                return _Request(self.command, url, headers, {**args, **form}, args, form)

            def _authorize(self, req: _Request, user: str) -> None:
                # authlib's two steps: the consent grant validates the request (the user
                # consents at once), then the authorization response issues the code.
                try:
                    grant = outer.auth.get_consent_grant(req, end_user=user)
                except OAuth2Error as error:
                    oauth_req = outer.auth.create_oauth2_request(req)
                    self._reply(*outer.auth.handle_error_response(oauth_req, error))
                    return
                self._reply(
                    *outer.auth.create_authorization_response(req, grant_user=user, grant=grant)
                )

            def do_GET(self) -> None:
                req = self._request()
                path = urlsplit(self.path).path
                if path == "/authorize":
                    self._authorize(req, user="ada")
                elif path == "/.well-known/openid-configuration":
                    self._reply(200, outer.discovery(), [])
                elif path == "/jwks":
                    outer.state.jwks_requests += 1
                    keys = KeySet([outer.state.key]).as_dict(private=False)
                    self._reply(200, keys, [])
                elif path == "/me":
                    auth = self.headers.get("Authorization", "")
                    token = next(
                        (
                            t
                            for t in outer.state.tokens
                            if f"Bearer {t.access_token}" == auth
                            and not t.revoked
                            and t.expires_at > time.time()
                        ),
                        None,
                    )
                    if token is None:
                        self._reply(401, {"error": "invalid_token"}, [])
                    else:
                        self._reply(200, {"user": outer.state.user}, [])
                else:
                    self._reply(404, {"error": "not_found"}, [])

            def do_POST(self) -> None:
                req = self._request()
                if urlsplit(self.path).path == "/token":
                    outer.state.token_requests.append(req.form.get("grant_type", ""))
                    self._reply(*outer.auth.create_token_response(req))
                else:
                    self._reply(404, {"error": "not_found"}, [])

        self.server = LocalHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

        self.state.issuer = self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def discovery(self) -> dict[str, Any]:
        """The OpenID Connect discovery document."""
        return {
            "issuer": self.url,
            "authorization_endpoint": self.url + "/authorize",
            "token_endpoint": self.url + "/token",
            "jwks_uri": self.url + "/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["openid", "email", "profile", "groups"],
        }

    def add_client(
        self, client_id: str, client_secret: str, redirect_uri: str, scope: str = "read write"
    ) -> None:
        self.state.clients[client_id] = Client(client_id, client_secret, [redirect_uri], scope)

    def start(self) -> OAuth2Provider:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def serving_provider(
    client_id: str, secret: str, redirect_uri: str, expires_in: int = 3600
) -> Iterator[OAuth2Provider]:
    """A started :class:`OAuth2Provider` knowing one client, stopped when the block ends."""
    running = OAuth2Provider(expires_in=expires_in).start()
    running.add_client(client_id, secret, redirect_uri)
    try:
        yield running
    finally:
        running.stop()
