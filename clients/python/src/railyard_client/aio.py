"""The asynchronous client: :class:`AsyncClient` over ``httpx.AsyncClient``.

Every method is one request (or one request per page for the ``iter_*`` iterators, one
stream for :meth:`AsyncClient.run_events`) and answers a model of
:mod:`railyard_client.models`; an error answer raises
:class:`~railyard_client.errors.ProblemError` (or the subclass of its status). The
synchronous :class:`~railyard_client.Client` runs these same methods on an event loop of
its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import httpx
import msgspec
from httpx_sse import aconnect_sse

from railyard_client.errors import problem_of
from railyard_client.models import (
    Credential,
    Delivery,
    DraftSaved,
    Imported,
    Page,
    Published,
    Resent,
    Run,
    RunEvent,
    RunStarted,
    SearchHit,
    SearchPage,
    SearchScope,
    SearchSort,
    Subscription,
    Token,
    Version,
    Workflow,
    WorkflowExport,
)

T = TypeVar("T")

API = "/api/v1"
RUN_EVENTS = API + "/runs/{run_id}/events"
"""The run's event stream (Server-Sent Events: an ``update`` with the run on every change,
until it ends)."""


def _subscriptions(workflow_id: str | None) -> str:
    """A workflow's subscriptions, or (``None``) the admin collection of every one."""
    if workflow_id is None:
        return f"{API}/admin/subscriptions"
    return f"{API}/workflows/{workflow_id}/subscriptions"


def _params(**filters: Any) -> dict[str, Any]:
    """The query parameters of ``filters`` that are set (``bool`` as ``true``/``false``)."""
    return {
        k: (str(v).lower() if isinstance(v, bool) else v)
        for k, v in filters.items()
        if v is not None
    }


def _document(document: WorkflowExport | Mapping[str, Any]) -> Any:
    """An export document as the JSON to send."""
    if isinstance(document, WorkflowExport):
        return msgspec.to_builtins(document)
    return dict(document)


class AsyncClient:
    """Railyard's API (``/api/v1``) at ``base_url``.

    Authenticates with ``token`` (an API token: ``Authorization: Bearer``) or, after
    :meth:`login`, with a login session (cookie plus the ``X-CSRFToken`` header the API
    asks of a session's unsafe requests). ``timeout`` is in seconds per request;
    ``transport`` and ``headers`` go to ``httpx.AsyncClient`` as they are.
    Use it as an async context manager, or call :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        all_headers = {"accept": "application/json", **(headers or {})}
        if token is not None:
            all_headers["authorization"] = f"Bearer {token}"
        self.http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers=all_headers,
            timeout=timeout,
            transport=transport,
            trust_env=False,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self.http.aclose()

    # ------------------------------------------------------------------ plumbing

    async def request(self, method: str, path: str, /, **kwargs: Any) -> httpx.Response:
        """Send any request (``kwargs`` as ``httpx.AsyncClient.request`` takes them) and
        answer the response as it is, whatever its status: for operations this client has
        no method for, and for tests of error answers."""
        return await self.http.request(method, path, **kwargs)

    async def get(self, path: str, /, **kwargs: Any) -> httpx.Response:
        """:meth:`request` with ``GET``."""
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, /, **kwargs: Any) -> httpx.Response:
        """:meth:`request` with ``POST``."""
        return await self.request("POST", path, **kwargs)

    async def put(self, path: str, /, **kwargs: Any) -> httpx.Response:
        """:meth:`request` with ``PUT``."""
        return await self.request("PUT", path, **kwargs)

    async def patch(self, path: str, /, **kwargs: Any) -> httpx.Response:
        """:meth:`request` with ``PATCH``."""
        return await self.request("PATCH", path, **kwargs)

    async def delete(self, path: str, /, **kwargs: Any) -> httpx.Response:
        """:meth:`request` with ``DELETE``."""
        return await self.request("DELETE", path, **kwargs)

    async def call(self, answer: type[T], method: str, path: str, **kwargs: Any) -> T:
        """Send a request and decode its answer as ``answer`` (``None`` for a 204).
        Raises :class:`~railyard_client.errors.ProblemError` for a status >= 400."""
        response = await self.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise problem_of(response)
        if response.status_code == 204:
            return msgspec.convert(None, answer)
        return msgspec.json.decode(response.content, type=answer)

    async def page(
        self, item: type[T], path: str, /, *, cursor: str | None = None, **filters: Any
    ) -> Page[T]:
        """One page of the collection at ``path`` (``limit``, filters as query
        parameters), starting at ``cursor`` (a previous page's ``next_cursor``)."""
        params = _params(cursor=cursor, **filters)
        envelope: Any = Page[item]  # type: ignore[valid-type]  # a runtime generic alias
        return await self.call(envelope, "GET", path, params=params)

    async def paginate(self, item: type[T], path: str, /, **filters: Any) -> AsyncIterator[T]:
        """Every item of the collection at ``path``, page after page (``limit`` is the
        page size), following each page's ``next_cursor`` until ``has_more`` is false."""
        cursor: str | None = None
        while True:
            page = await self.page(item, path, cursor=cursor, **filters)
            for entry in page.data:
                yield entry
            if not page.has_more or page.next_cursor is None:
                return
            cursor = page.next_cursor

    # ------------------------------------------------------------------ identity

    async def login(self, email: str, password: str) -> None:
        """Log in with a user's email and password: the session cookie authenticates
        later requests, and the CSRF token (from the cookie Railyard sets on any page)
        goes with every request. Raises ``Unauthorized`` for a wrong password."""
        await self.http.get("/login")
        csrf = self.http.cookies.get("csrftoken")
        if csrf:
            self.http.headers["x-csrftoken"] = csrf
        await self.call(
            dict, "POST", f"{API}/auth/login", json={"email": email, "password": password}
        )

    async def create_token(
        self, name: str, *, scopes: list[str] | None = None, expires_in_days: int | None = None
    ) -> Token:
        """A new API token of the caller (``token`` holds the secret, shown this once);
        ``scopes`` of ``read``, ``run``, ``edit``, ``admin`` (all the caller has when
        ``None``)."""
        body = {"name": name, "scopes": scopes, "expires_in_days": expires_in_days}
        return await self.call(Token, "POST", f"{API}/tokens", json=body)

    # ------------------------------------------------------------------ workflows

    def iter_workflows(
        self, *, archived: bool | None = None, limit: int = 100
    ) -> AsyncIterator[Workflow]:
        """Every workflow the caller may read, newest first (``archived=True``: only the
        archived ones)."""
        return self.paginate(Workflow, f"{API}/workflows", archived=archived, limit=limit)

    async def get_workflow(self, workflow_id: str) -> Workflow:
        """One workflow with its ``draft``."""
        return await self.call(Workflow, "GET", f"{API}/workflows/{workflow_id}")

    async def create_workflow(
        self, name: str, *, description: str = "", tags: list[str] | None = None
    ) -> Workflow:
        """A new workflow with an empty draft."""
        body = {"name": name, "description": description, "tags": tags or []}
        return await self.call(Workflow, "POST", f"{API}/workflows", json=body)

    async def update_workflow(self, workflow_id: str, /, **changes: Any) -> Workflow:
        """Change any of ``name``, ``description``, ``tags``, ``settings``."""
        return await self.call(Workflow, "PATCH", f"{API}/workflows/{workflow_id}", json=changes)

    async def archive_workflow(self, workflow_id: str) -> None:
        """Archive (delete) the workflow: no webhook, schedule or new run any more."""
        await self.call(type(None), "DELETE", f"{API}/workflows/{workflow_id}")

    async def save_draft(
        self, workflow_id: str, diagram: Mapping[str, Any], *, base_revision: int | None = None
    ) -> DraftSaved:
        """Save the draft diagram. With ``base_revision`` a save based on an older draft
        than the stored one is refused (``Conflict``)."""
        body: dict[str, Any] = {"diagram": diagram}
        if base_revision is not None:
            body["base_revision"] = base_revision
        return await self.call(DraftSaved, "PUT", f"{API}/workflows/{workflow_id}/draft", json=body)

    async def publish(self, workflow_id: str, *, note: str = "") -> Published:
        """Publish the draft as the active version. A diagram with errors raises
        ``Unprocessable`` (its ``body["diagnostics"]``)."""
        path = f"{API}/workflows/{workflow_id}/publish"
        return await self.call(Published, "POST", path, json={"note": note})

    def iter_versions(self, workflow_id: str, *, limit: int = 100) -> AsyncIterator[Version]:
        """The workflow's published versions, newest first."""
        return self.paginate(Version, f"{API}/workflows/{workflow_id}/versions", limit=limit)

    async def get_version(self, workflow_id: str, version: int) -> Version:
        """One published version."""
        return await self.call(Version, "GET", f"{API}/workflows/{workflow_id}/versions/{version}")

    async def export_workflow(
        self, workflow_id: str, *, version: int | None = None
    ) -> WorkflowExport:
        """The workflow's ``railyard/workflow`` export document: of its draft, or of the
        published ``version``. Credentials and called workflows are named, never a
        secret."""
        params = _params(version=version)
        path = f"{API}/workflows/{workflow_id}/export"
        return await self.call(WorkflowExport, "GET", path, params=params)

    async def import_workflow(
        self, document: WorkflowExport | Mapping[str, Any], *, name: str | None = None
    ) -> Imported:
        """A new workflow from an export ``document`` (an :class:`WorkflowExport`, or the
        document as a ``dict``, e.g. read from a file), named as exported or ``name``;
        references that could not be re-bound by name are in its ``diagnostics``.
        A document that cannot be read raises ``InvalidRequest`` naming the place."""
        path = f"{API}/workflows/import"
        body = _document(document)
        return await self.call(Imported, "POST", path, json=body, params=_params(name=name))

    async def import_into_draft(
        self,
        workflow_id: str,
        document: WorkflowExport | Mapping[str, Any],
        *,
        base_revision: int | None = None,
    ) -> Imported:
        """Replace the workflow's draft with an export ``document``'s diagram (its name
        and settings stay). With ``base_revision`` an import over a newer draft than that
        revision raises ``Conflict``."""
        path = f"{API}/workflows/{workflow_id}/import"
        params = _params(base_revision=base_revision)
        return await self.call(Imported, "POST", path, json=_document(document), params=params)

    # ------------------------------------------------------------------ search

    async def search(
        self,
        q: str = "",
        *,
        scope: SearchScope | None = None,
        sort: SearchSort | None = None,
        limit: int = 25,
        cursor: str | None = None,
    ) -> SearchPage:
        """One page of hits for the query ``q`` (the search box's syntax:
        ``status:failed workflow:"Order intake" since:24h``) in ``scope`` (runs by
        default; workflows, audit), in the ``sort`` of that scope, ``limit`` 1 to 100
        hits, from ``cursor`` (a previous page's ``next_cursor``). Only what the caller
        may open is found. A malformed query raises ``InvalidRequest`` (its ``errors``
        name ``q``; ``body["position"]`` is where)."""
        params = _params(q=q, limit=limit, cursor=cursor, sort=sort, **{"in": scope})
        return await self.call(SearchPage, "GET", f"{API}/search", params=params)

    def iter_search(
        self,
        q: str = "",
        *,
        scope: SearchScope | None = None,
        sort: SearchSort | None = None,
        limit: int = 25,
    ) -> AsyncIterator[SearchHit]:
        """Every hit of :meth:`search`, page after page (``limit`` is the page size)."""
        filters = {"q": q, "sort": sort, "limit": limit, "in": scope}
        return self.paginate(SearchHit, f"{API}/search", **filters)

    # ------------------------------------------------------------------ runs

    async def start_run(
        self, workflow_id: str, input: Any = None, *, idempotency_key: str | None = None
    ) -> RunStarted:
        """Start a run of the workflow's active version with ``input`` (a JSON value).
        With ``idempotency_key`` (1 to 200 characters) at most one run starts per key:
        a repeat, e.g. after a timeout, answers the run the first one started."""
        headers = {"idempotency-key": idempotency_key} if idempotency_key is not None else {}
        body = {"input": {} if input is None else input}
        path = f"{API}/workflows/{workflow_id}/runs"
        return await self.call(RunStarted, "POST", path, json=body, headers=headers)

    async def get_run(self, run_id: str) -> Run:
        """One run with its input, output, error and steps."""
        return await self.call(Run, "GET", f"{API}/runs/{run_id}")

    def iter_runs(
        self, *, workflow_id: str | None = None, status: str | None = None, limit: int = 100
    ) -> AsyncIterator[Run]:
        """Runs (summaries), newest first, of one workflow and/or in one status."""
        return self.paginate(
            Run, f"{API}/runs", workflow_id=workflow_id, status=status, limit=limit
        )

    async def cancel_run(self, run_id: str) -> None:
        """Cancel an active run (``Conflict`` once it ended)."""
        await self.call(dict, "POST", f"{API}/runs/{run_id}/cancel")

    async def run_events(self, run_id: str) -> AsyncIterator[RunEvent]:
        """The run's event stream (Server-Sent Events): the run now, then again on every
        change, until it ends. The stream waits as long as the run does (no read
        timeout); bound it with ``asyncio.timeout`` or use :meth:`wait_for_run`."""
        timeout = httpx.Timeout(self.http.timeout.connect, read=None)
        url = RUN_EVENTS.format(run_id=run_id)
        async with aconnect_sse(self.http, "GET", url, timeout=timeout) as source:
            if source.response.status_code >= 400:
                await source.response.aread()
                raise problem_of(source.response)
            async for message in source.aiter_sse():
                run = msgspec.json.decode(message.data, type=Run)
                yield RunEvent(event=message.event, run=run)

    async def wait_for_run(self, run_id: str, timeout: float = 60.0) -> Run:
        """The run once it ended, followed on its event stream. Raises ``TimeoutError``
        after ``timeout`` seconds."""
        async with asyncio.timeout(timeout):
            async for event in self.run_events(run_id):
                if event.run.ended:
                    return event.run
        return await self.get_run(run_id)  # the stream closed early: the run as it is

    # ------------------------------------------------------------------ credentials

    def iter_credentials(
        self, *, type: str | None = None, limit: int = 100
    ) -> AsyncIterator[Credential]:
        """The credentials the caller may use, optionally of one credential ``type``."""
        return self.paginate(Credential, f"{API}/credentials", type=type, limit=limit)

    async def get_credential(self, credential_id: str) -> Credential:
        """One credential (its secret fields named, never answered)."""
        return await self.call(Credential, "GET", f"{API}/credentials/{credential_id}")

    async def create_credential(self, name: str, type: str, data: Mapping[str, Any]) -> Credential:
        """A new credential of ``type`` (e.g. ``http.bearer``) holding ``data``."""
        body = {"name": name, "type": type, "data": dict(data)}
        return await self.call(Credential, "POST", f"{API}/credentials", json=body)

    async def delete_credential(self, credential_id: str) -> None:
        """Delete the credential (``Conflict`` while a published version uses it)."""
        await self.call(type(None), "DELETE", f"{API}/credentials/{credential_id}")

    # ------------------------------------------------------------------ subscriptions

    def iter_subscriptions(
        self, workflow_id: str | None = None, *, limit: int = 100
    ) -> AsyncIterator[Subscription]:
        """A workflow's event subscriptions, or (no ``workflow_id``, admins) every one."""
        return self.paginate(Subscription, _subscriptions(workflow_id), limit=limit)

    async def create_subscription(
        self,
        *,
        url: str,
        events: list[str],
        description: str = "",
        workflow_id: str | None = None,
        project_id: str | None = None,
    ) -> Subscription:
        """Subscribe ``url`` to ``events`` (``run.failed``, ``workflow.published``, ...)
        of the workflow ``workflow_id``; without it (admins) of the project
        ``project_id``'s workflows, or of every workflow when neither is given. The
        answer's ``secret`` verifies the deliveries (Standard Webhooks); it is shown this
        once. Raises ``ValueError`` for both ``workflow_id`` and ``project_id`` (a
        workflow's subscription is of that workflow alone)."""
        if workflow_id is not None and project_id is not None:
            raise ValueError("give workflow_id or project_id, not both")
        body: dict[str, Any] = {"url": url, "events": events, "description": description}
        if workflow_id is None:
            body["project_id"] = project_id
        return await self.call(Subscription, "POST", _subscriptions(workflow_id), json=body)

    async def get_subscription(
        self, subscription_id: str, *, workflow_id: str | None = None
    ) -> Subscription:
        """One subscription."""
        path = f"{_subscriptions(workflow_id)}/{subscription_id}"
        return await self.call(Subscription, "GET", path)

    async def update_subscription(
        self,
        subscription_id: str,
        *,
        workflow_id: str | None = None,
        url: str | None = None,
        events: list[str] | None = None,
        description: str | None = None,
        enabled: bool | None = None,
    ) -> Subscription:
        """Change the ``url``, ``events``, ``description`` or ``enabled`` given (``None``
        keeps the value); ``enabled=True`` re-enables a disabled subscription."""
        path = f"{_subscriptions(workflow_id)}/{subscription_id}"
        given = {"url": url, "events": events, "description": description, "enabled": enabled}
        changes = {k: v for k, v in given.items() if v is not None}
        return await self.call(Subscription, "PATCH", path, json=changes)

    async def delete_subscription(
        self, subscription_id: str, *, workflow_id: str | None = None
    ) -> None:
        """Delete the subscription with its delivery log."""
        path = f"{_subscriptions(workflow_id)}/{subscription_id}"
        await self.call(type(None), "DELETE", path)

    def iter_deliveries(
        self, subscription_id: str, *, workflow_id: str | None = None, limit: int = 100
    ) -> AsyncIterator[Delivery]:
        """The subscription's delivery log, newest first, each with its attempts."""
        path = f"{_subscriptions(workflow_id)}/{subscription_id}/deliveries"
        return self.paginate(Delivery, path, limit=limit)

    async def resend_delivery(
        self, subscription_id: str, delivery_id: str, *, workflow_id: str | None = None
    ) -> Resent:
        """Send one delivery again now; what the receiver answered."""
        path = f"{_subscriptions(workflow_id)}/{subscription_id}/deliveries/{delivery_id}/resend"
        return await self.call(Resent, "POST", path)
