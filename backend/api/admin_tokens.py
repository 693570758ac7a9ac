"""``/api/admin/tokens`` (every API token: list, revoke; ``tokens:manage``) and
``/api/admin/service-accounts`` (users for automation that own tokens and cannot log in;
``users:manage`` to create, ``tokens:manage`` to mint their tokens)."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from litestar import Controller, Request, delete, get, post
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, JSONBody

from backend.api.list_schemas import TokenList, newest_first
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, ListPage, listed
from backend.api.schemas import Name, RoleName
from backend.api.token_schemas import TokenIn, TokenOut, token_out
from backend.auth.policy import Permission
from backend.services.identity import api_tokens, service_accounts
from backend.web.authentication import DbSession
from backend.web.guards import access_dependencies


class ServiceAccountIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/admin/service-accounts."""

    name: Name
    role: RoleName = "operator"


class ServiceAccountOut(msgspec.Struct):
    """A service account (a user of kind ``service``)."""

    id: str
    name: str
    email: str
    role: str
    active: bool


class ServiceAccountList(ListPage):
    """A page of service accounts, by name."""

    data: list[ServiceAccountOut]


class AdminTokenController(Controller):
    """Every API token of the installation."""

    path = "/api/v1/admin/tokens"
    tags = ["admin"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_all_tokens", opt={"permission": Permission.TOKENS_MANAGE})
    async def list_all(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> TokenList:
        """Every token with its owner's email, newest first (never the token text)."""
        found = [token_out(t, owner=u.email) for t, u in await api_tokens.list_all_tokens(db)]
        return newest_first(request, TokenList, found, cursor=cursor, limit=limit)

    @delete(
        "/{token_id:uuid}",
        operation_id="revoke_any_token",
        opt={"permission": Permission.TOKENS_MANAGE},
    )
    async def revoke(self, db: DbSession, token_id: FromPath[uuid.UUID]) -> None:
        """Revoke any token (204; 404 when unknown)."""
        if not await api_tokens.revoke_token(db, None, token_id):
            raise NotFoundException("no such token")


class ServiceAccountController(Controller):
    """Service accounts and their tokens."""

    path = "/api/v1/admin/service-accounts"
    tags = ["admin"]
    dependencies = access_dependencies()

    @get("/", operation_id="list_service_accounts", opt={"permission": Permission.USERS_MANAGE})
    async def list_accounts(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> ServiceAccountList:
        """Every service account."""
        found = [
            ServiceAccountOut(str(u.id), u.display_name, u.email, u.role, u.is_active)
            for u in await service_accounts.list_service_accounts(db)
        ]
        return listed(
            request,
            ServiceAccountList,
            found,
            lambda a: (a.name, a.id),
            tuple[str, str],
            cursor=cursor,
            limit=limit,
        )

    @post("/", operation_id="create_service_account", opt={"permission": Permission.USERS_MANAGE})
    async def create(self, db: DbSession, data: JSONBody[ServiceAccountIn]) -> ServiceAccountOut:
        """Create a service account with a role (201); 400 for a bad name or role."""
        u = await service_accounts.create_service_account(db, data.name, data.role)
        return ServiceAccountOut(str(u.id), u.display_name, u.email, u.role, u.is_active)

    @post(
        "/{user_id:uuid}/tokens",
        operation_id="create_service_account_token",
        opt={"permission": Permission.TOKENS_MANAGE},
    )
    async def create_token(
        self, db: DbSession, user_id: FromPath[uuid.UUID], data: JSONBody[TokenIn]
    ) -> TokenOut:
        """Mint a token owned by the service account (201; the text is shown once)."""
        account = await service_accounts.get_service_account(db, user_id)
        if account is None:
            raise NotFoundException("no such service account")
        row, token = await api_tokens.create_for(
            db, account, data.name, data.scopes, data.expires_in_days
        )
        await db.refresh(row)
        return token_out(row, token, owner=account.email)
