"""``/api/credentials``: create, list (masked), update, delete credentials; OAuth2 connect.

Secrets go in (``data`` of POST/PATCH) and never come out: responses carry ``public``
(non-secret fields and masked hints). Errors: 400 ``{"detail", "field"}`` for invalid
input, 404 for an unknown id or OAuth2 state, 409 to connect a credential that is not an
OAuth2 one, 503 when no encryption key is configured.

OAuth2: ``GET /api/credentials/{id}/connect`` redirects the browser to the provider;
the provider redirects back to ``GET /api/credentials/oauth2/callback?state=&code=``,
which stores the tokens and redirects to ``/credentials?connected=<id>`` (or
``/credentials?error=<message>``).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from litestar.response import Redirect

from backend import crypto, problems
from backend.api.errors import problem_response
from backend.api.list_schemas import CredentialList
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, ListPage, listed
from backend.api.schemas import Name
from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services import outbound
from backend.services.connectors import credential_oauth
from backend.services.connectors import credentials as svc
from backend.services.identity import access
from backend.web.authentication import AppRuntime, CurrentUser, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies


class CredentialIn(msgspec.Struct, forbid_unknown_fields=True):
    """POST body: a name, a credential type name and the type's fields."""

    name: Name
    type: str
    data: dict[str, Any] = {}


class CredentialPatch(msgspec.Struct, forbid_unknown_fields=True):
    """PATCH body: omitted keys keep their value; empty secret fields keep the secret."""

    name: Name | msgspec.UnsetType = msgspec.UNSET
    data: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


class CredentialTypeOut(msgspec.Struct):
    """A declared credential type and the JSON Schema of its form."""

    name: str
    label: str
    kind: str
    description: str
    schema: dict[str, Any]
    secret_fields: list[str]


class CredentialTypeList(ListPage):
    """A page of credential types, by name."""

    data: list[CredentialTypeOut]


def _invalid(request: Request[Any, Any, Any], exc: svc.CredentialError) -> Response[bytes]:
    return problem_response(request, 400, exc.message, field=exc.field)


def _not_oauth2(request: Request[Any, Any, Any], exc: svc.NotOAuth2) -> Response[bytes]:
    return problem_response(request, 409, exc.message, type=problems.STATE_CONFLICT)


def _not_found(request: Request[Any, Any, Any], exc: svc.CredentialNotFound) -> Response[bytes]:
    return problem_response(request, 404, f"credential not found: {str(exc).strip(chr(39))}")


def _no_key(request: Request[Any, Any, Any], exc: crypto.CryptoError) -> Response[bytes]:
    return problem_response(
        request, 503, f"credentials are unavailable: {exc}", type=problems.UNAVAILABLE
    )


def callback_url(runtime: Runtime) -> str:
    """The OAuth2 redirect URI to register with providers."""
    return f"{runtime.settings.base_url.rstrip('/')}/api/credentials/oauth2/callback"


class CredentialController(Controller):
    """Credentials (see docs/credentials.md); who may see, use and change each one is
    decided per credential (docs/security.md)."""

    path = "/api/v1/credentials"
    tags = ["credentials"]
    dependencies = access_dependencies()
    exception_handlers = {
        svc.CredentialError: _invalid,
        svc.NotOAuth2: _not_oauth2,
        svc.CredentialNotFound: _not_found,
        crypto.CryptoError: _no_key,
    }

    @get("/", operation_id="list_credentials", opt={"permission": Permission.CREDENTIAL_LIST})
    async def list_credentials(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        type: FromQuery[str | None] = None,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> CredentialList:
        """The credentials the caller may use, masked; ``?type=a,b`` filters by type."""
        types = tuple(t for t in (type or "").split(",") if t) or None
        visible = await access.credential_filter(db, principal)
        found = await svc.list_credentials(db, runtime.catalog, types, visible)
        return listed(
            request,
            CredentialList,
            found,
            lambda c: (c.name, c.id),
            tuple[str, str],
            cursor=cursor,
            limit=limit,
        )

    @get(
        "/types", operation_id="list_credential_types", opt={"permission": Permission.AUTHENTICATED}
    )
    async def list_types(
        self,
        request: Request[Any, Any, Any],
        runtime: AppRuntime,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> CredentialTypeList:
        """Credential types declared by the installed connectors."""
        found = [
            CredentialTypeOut(
                name=t.name,
                label=t.label,
                kind=t.kind,
                description=t.description,
                schema=t.json_schema(),
                secret_fields=list(t.secret_fields),
            )
            for t in runtime.catalog.credential_types.values()
        ]
        return listed(
            request,
            CredentialTypeList,
            found,
            lambda t: (t.name,),
            tuple[str],
            cursor=cursor,
            limit=limit,
        )

    @post("/", operation_id="create_credential", opt={"permission": Permission.CREDENTIAL_CREATE})
    async def create_credential(
        self, db: DbSession, runtime: AppRuntime, user: CurrentUser, data: JSONBody[CredentialIn]
    ) -> svc.CredentialView:
        """Store a new credential (its secrets encrypted); 201 with the masked view."""
        view = await svc.create_credential(
            db,
            runtime.catalog,
            crypto.keyring_from_settings(runtime.settings),
            name=data.name,
            type_name=data.type,
            data=data.data,
            user_id=user.id,
        )
        return view

    @get(
        "/{credential_id:str}",
        operation_id="get_credential",
        opt={"permission": Permission.CREDENTIAL_USE},
    )
    async def get_credential(
        self, db: DbSession, runtime: AppRuntime, credential_id: FromPath[str]
    ) -> svc.CredentialView:
        """One credential, masked."""
        return await svc.get_credential(db, runtime.catalog, credential_id)

    @patch(
        "/{credential_id:str}",
        operation_id="update_credential",
        opt={"permission": Permission.CREDENTIAL_MANAGE},
    )
    async def update_credential(
        self,
        db: DbSession,
        runtime: AppRuntime,
        user: CurrentUser,
        credential_id: FromPath[str],
        data: JSONBody[CredentialPatch],
    ) -> svc.CredentialView:
        """Rename or change fields; write-only secrets left empty are kept."""
        view = await svc.update_credential(
            db,
            runtime.catalog,
            crypto.keyring_from_settings(runtime.settings),
            credential_id,
            name=None if data.name is msgspec.UNSET else data.name,
            data=None if data.data is msgspec.UNSET else data.data,
            user_id=user.id,
        )
        return view

    @delete(
        "/{credential_id:str}",
        operation_id="delete_credential",
        opt={"permission": Permission.CREDENTIAL_MANAGE},
    )
    async def delete_credential(
        self, db: DbSession, user: CurrentUser, credential_id: FromPath[str]
    ) -> None:
        """Delete a credential (204)."""
        await svc.delete_credential(db, credential_id, user_id=user.id)

    @get(
        "/{credential_id:str}/connect",
        operation_id="connect_credential",
        opt={"permission": Permission.CREDENTIAL_MANAGE},
    )
    async def connect(
        self, db: DbSession, runtime: AppRuntime, user: CurrentUser, credential_id: FromPath[str]
    ) -> Redirect:
        """Start the OAuth2 authorization-code flow: 302 to the provider."""
        url = await credential_oauth.start_oauth(
            db,
            runtime.catalog,
            crypto.keyring_from_settings(runtime.settings),
            credential_id,
            redirect_uri=callback_url(runtime),
            user_id=user.id,
        )
        return Redirect(url)

    @get(
        "/oauth2/callback",
        operation_id="oauth2_callback",
        opt={"permission": Permission.AUTHENTICATED},
    )
    async def callback(
        self,
        runtime: AppRuntime,
        user: CurrentUser,
        oauth_state: Annotated[str, QueryParameter(name="state")] = "",
        code: FromQuery[str] = "",
        error: FromQuery[str] = "",
        error_description: FromQuery[str] = "",
    ) -> Redirect:
        """Finish the flow (the provider redirects the browser here)."""
        if error or not code or not oauth_state:
            message = error_description or error or "the provider returned no code"
            return Redirect(f"/credentials?error={quote(message)}")
        try:
            async with runtime.sessionmaker() as session, session.begin():
                view = await credential_oauth.finish_oauth(
                    session,
                    runtime.catalog,
                    crypto.keyring_from_settings(runtime.settings),
                    state=oauth_state,
                    code=code,
                    user_id=user.id,
                    transport=outbound.guarded_transport(runtime.settings),
                )
        except (svc.CredentialError, svc.CredentialNotFound) as err:
            return Redirect(f"/credentials?error={quote(str(err))}")
        return Redirect(f"/credentials?connected={view.id}")
