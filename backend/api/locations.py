"""``Location`` on every 201: the absolute URL of what the request created (RFC 9110
section 10.2.2), from one table (:data:`LOCATIONS`) instead of each handler.

:class:`CreatedLocation` (a middleware) holds back the start of a 201 answer of an
operation in the table until its body (a small JSON object) is in, reads the created
object's id from it, and sends the answer with ``Location`` set: the settings' base URL,
``/api/v1`` and the operation's template filled from the request's path parameters and
the answer's fields (dotted paths: ``{version.version}``). Any other answer passes through
untouched. A template whose field is missing from the body leaves the answer without
``Location`` rather than pointing somewhere wrong (the conventions test fails then).
"""

from __future__ import annotations

import re
from typing import Any, cast

import msgspec
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from backend.api.versioning import PREFIX

LOCATIONS: dict[str, str] = {
    "create_workflow": "/workflows/{id}",
    "duplicate_workflow": "/workflows/{id}",
    "import_workflow": "/workflows/{id}",
    "publish_workflow": "/workflows/{workflow_id}/versions/{version.version}",
    "start_run": "/runs/{id}",
    "rerun_run": "/runs/{id}",
    "replay_run": "/runs/{id}",
    "start_test_run": "/runs/{id}",
    "create_credential": "/credentials/{id}",
    "create_api_token": "/tokens/{id}",
    "create_user": "/admin/users/{user.id}",
    "create_service_account": "/admin/users/{id}",
    "create_service_account_token": "/admin/tokens/{id}",
    "create_group": "/admin/groups/{id}",
    "create_project": "/admin/projects/{id}",
    "set_project_grant": "/admin/projects/{project_id}/grants/{id}",
    "set_workflow_grant": "/workflows/{workflow_id}/grants/{id}",
    "set_credential_grant": "/credentials/{credential_id}/grants/{id}",
    "import_connector": "/admin/connectors/{name}",
    "create_workflow_subscription": "/workflows/{workflow_id}/subscriptions/{id}",
    "create_project_subscription": "/admin/subscriptions/{id}",
}
"""Where each creating operation's object lives, under ``/api/v1`` (by ``operation_id``)."""

_FIELD = re.compile(r"\{([^}]+)\}")


def location(template: str, path_params: dict[str, Any], body: Any) -> str | None:
    """``template`` filled from ``path_params``, then ``body`` (a decoded JSON object;
    dotted names walk into it); ``None`` when a name is found in neither."""
    missing = False

    def fill(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group(1)
        if name in path_params:
            return str(path_params[name])
        value: Any = body
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None or isinstance(value, (dict, list)):
            missing = True
            return ""
        return str(value)

    filled = _FIELD.sub(fill, template)
    return None if missing else filled


class CreatedLocation(ASGIMiddleware):
    """The middleware described in the module doc."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        handler = scope.get("route_handler")
        operation = getattr(handler, "operation_id", None)
        template = LOCATIONS.get(operation) if isinstance(operation, str) else None
        if template is None:
            await next_app(scope, receive, send)
            return
        held: list[Message] = []

        async def hold(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 201:
                held.append(message)
                return
            if held and message["type"] == "http.response.body":
                held.append(message)
                if message.get("more_body", False):
                    return
                await _send_with_location(scope, template, held, send)
                held.clear()
                return
            await send(message)

        await next_app(scope, receive, hold)


async def _send_with_location(scope: Scope, template: str, held: list[Message], send: Send) -> None:
    """Send the held start (with ``Location`` when it can be made) and body messages."""
    start: dict[str, Any] = dict(held[0])
    chunks = held[1:]
    raw = b"".join(cast(bytes, m.get("body", b"")) for m in chunks)
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        body = None
    where = location(template, dict(scope.get("path_params") or {}), body)
    if where is not None:
        base = scope["app"].state.runtime.settings.base_url.rstrip("/")
        header = (b"location", f"{base}{PREFIX}{where}".encode())
        start["headers"] = [*start.get("headers", []), header]
    await send(start)  # type: ignore[arg-type]  # the held start message, one header more
    for message in chunks:
        await send(message)
