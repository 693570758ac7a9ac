"""Trigger administration API: webhook settings and test calls, API tokens, stored files.

- ``/api/workflows/{id}/webhook``: URLs and whether a secret is set (GET); the write-only
  secret (PUT/DELETE ``/secret``); listen for a test call (POST ``/listen``); the last test
  call (GET ``/test-call``); recent deliveries, accepted and rejected (GET ``/deliveries``).
- ``/api/tokens``: create (the token text is returned once), list, revoke.
- ``/api/files/{id}``: download a file uploaded to a webhook.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import msgspec
from litestar import Controller, Request, Response, delete, get, post, put
from litestar.exceptions import HTTPException, NotFoundException
from litestar.params import FromPath, JSONBody

from backend.api.list_schemas import TokenList, newest_first
from backend.api.lists import DEFAULT_LIMIT, Cursor, Limit, ListPage, listed
from backend.api.schemas import Secret
from backend.api.token_schemas import TokenIn, TokenOut, token_out
from backend.auth.policy import Permission
from backend.runtime import Runtime
from backend.services.identity import api_tokens
from backend.services.triggers import webhook_listening as listening
from backend.services.triggers import webhooks as hooks
from backend.services.triggers.webhook_urls import hook_urls
from backend.services.unit_of_work import UnitOfWork
from backend.services.workflows import workflows as svc
from backend.web.authentication import AppRuntime, CurrentUser, DbSession, user_dependencies

_DEPS = user_dependencies()


class WebhookInfo(msgspec.Struct):
    """The webhook URLs of a workflow and whether a secret is set (never the secret)."""

    url: str
    test_url: str
    secret_set: bool
    listening: bool


class SecretIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of PUT .../webhook/secret: the token, basic password or HMAC key."""

    secret: Secret


class TestCallOut(msgspec.Struct):
    """The last request to the test URL: its parsed run input, or why it was refused."""

    received_at: datetime | None
    input: Any = None
    error: str | None = None


class WebhookDeliveryOut(msgspec.Struct):
    """An accepted (a run) or rejected webhook delivery."""

    received_at: datetime
    outcome: str
    status: str
    reason: str
    run_id: str | None


class WebhookDeliveryList(ListPage):
    """A page of a workflow's webhook deliveries, newest first."""

    data: list[WebhookDeliveryOut]


async def _info(workflow_id: uuid.UUID, db: UnitOfWork, runtime: Runtime) -> WebhookInfo:
    wf = await svc.get_workflow(db, workflow_id)
    endpoint = await hooks.load_endpoint(db, wf.webhook_token, draft=True)
    suffix = endpoint.config.suffix if endpoint else ""
    url, test_url = hook_urls(runtime.settings.base_url, wf.webhook_token, suffix)
    return WebhookInfo(
        url=url,
        test_url=test_url,
        secret_set=await hooks.secret_is_set(db, workflow_id),
        listening=await listening.is_listening(runtime.redis, workflow_id),
    )


class WebhookSettingsController(Controller):
    """A workflow's webhook: secret, test calls and deliveries (login required)."""

    path = "/api/v1/workflows/{workflow_id:uuid}/webhook"
    tags = ["webhooks"]
    dependencies = _DEPS

    @get("/", operation_id="get_webhook", opt={"permission": Permission.WORKFLOW_READ})
    async def info(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, runtime: AppRuntime
    ) -> WebhookInfo:
        """URLs (with the draft's path suffix), whether a secret is set, whether listening."""
        return await _info(workflow_id, db, runtime)

    @put(
        "/secret",
        operation_id="set_webhook_secret",
        opt={"permission": Permission.WORKFLOW_EDIT},
        status_code=204,
    )
    async def set_secret(
        self, workflow_id: FromPath[uuid.UUID], data: JSONBody[SecretIn], db: DbSession
    ) -> None:
        """Store the write-only secret (encrypted); it is never shown again."""
        await svc.get_workflow(db, workflow_id)
        if not data.secret.strip():
            raise HTTPException(status_code=400, detail="the secret must not be empty")
        await hooks.set_secret(db, workflow_id, data.secret)
        hooks.clear_endpoint_cache()

    @delete(
        "/secret",
        operation_id="delete_webhook_secret",
        opt={"permission": Permission.WORKFLOW_EDIT},
        status_code=204,
    )
    async def delete_secret(self, workflow_id: FromPath[uuid.UUID], db: DbSession) -> None:
        """Remove the secret (authenticated webhooks then refuse every request)."""
        await svc.get_workflow(db, workflow_id)
        await hooks.set_secret(db, workflow_id, None)
        hooks.clear_endpoint_cache()

    @post(
        "/listen",
        operation_id="listen_webhook_test",
        opt={"permission": Permission.WORKFLOW_EDIT},
        status_code=200,
    )
    async def listen(
        self, workflow_id: FromPath[uuid.UUID], db: DbSession, runtime: AppRuntime
    ) -> WebhookInfo:
        """Accept one request on the test URL during the next 120 seconds."""
        await svc.get_workflow(db, workflow_id)
        await listening.start_listening(runtime.redis, workflow_id)
        return await _info(workflow_id, db, runtime)

    @get(
        "/test-call",
        operation_id="get_webhook_test_call",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def test_call(self, workflow_id: FromPath[uuid.UUID], db: DbSession) -> TestCallOut:
        """The last test call (``received_at`` null when none was received yet)."""
        await svc.get_workflow(db, workflow_id)
        row = await hooks.last_test_call(db, workflow_id)
        if row is None:
            return TestCallOut(received_at=None)
        return TestCallOut(received_at=row.received_at, input=row.input, error=row.error)

    @get(
        "/deliveries",
        operation_id="list_webhook_deliveries",
        opt={"permission": Permission.WORKFLOW_READ},
    )
    async def deliveries(
        self,
        request: Request[Any, Any, Any],
        workflow_id: FromPath[uuid.UUID],
        db: DbSession,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> WebhookDeliveryList:
        """The last 50 deliveries, newest first: runs started and requests rejected
        (a page of them, by receipt time)."""
        await svc.get_workflow(db, workflow_id)
        found = [
            WebhookDeliveryOut(r.received_at, r.outcome, r.status, r.reason, r.run_id)
            for r in await hooks.list_deliveries(db, workflow_id)
        ]
        return listed(
            request,
            WebhookDeliveryList,
            found,
            lambda d: (d.received_at, d.outcome, d.run_id or d.reason),
            tuple[datetime, str, str],
            cursor=cursor,
            limit=limit,
            descending=True,
        )


class ApiTokenController(Controller):
    """The logged-in user's API tokens."""

    path = "/api/v1/tokens"
    tags = ["tokens"]
    dependencies = _DEPS

    @get("/", operation_id="list_api_tokens", opt={"permission": Permission.TOKENS_OWN})
    async def list_tokens(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        user: CurrentUser,
        cursor: Cursor = None,
        limit: Limit = DEFAULT_LIMIT,
    ) -> TokenList:
        """The user's tokens (never their text)."""
        found = [token_out(t) for t in await api_tokens.list_tokens(db, user.id)]
        return newest_first(request, TokenList, found, cursor=cursor, limit=limit)

    @post("/", operation_id="create_api_token", opt={"permission": Permission.TOKENS_OWN})
    async def create(self, data: JSONBody[TokenIn], db: DbSession, user: CurrentUser) -> TokenOut:
        """Create a token (201); the answer holds its text, shown only this once."""
        row, token = await api_tokens.create_for(
            db, user, data.name, data.scopes, data.expires_in_days
        )
        await db.refresh(row)
        return token_out(row, token)

    @delete(
        "/{token_id:uuid}",
        operation_id="revoke_api_token",
        opt={"permission": Permission.TOKENS_OWN},
        status_code=204,
    )
    async def revoke(self, token_id: FromPath[uuid.UUID], db: DbSession, user: CurrentUser) -> None:
        """Revoke one of the user's tokens; 404 when it does not exist."""
        if not await api_tokens.revoke_token(db, user.id, token_id):
            raise NotFoundException("no such token")


class FileController(Controller):
    """Files uploaded to webhooks (referenced from run inputs as ``file:<id>``)."""

    path = "/api/v1/files"
    tags = ["files"]
    dependencies = _DEPS

    @get("/{file_id:uuid}", operation_id="download_file", opt={"permission": Permission.FILE_READ})
    async def download(self, file_id: FromPath[uuid.UUID], db: DbSession) -> Response[bytes]:
        """The file's bytes with its content type, as an attachment."""
        row = await hooks.get_file(db, file_id)
        if row is None:
            raise NotFoundException("no such file")
        name = row.filename.replace('"', "")
        return Response(
            row.content,
            media_type=row.content_type,
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )
