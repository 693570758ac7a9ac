"""Rendering the HTML pages: the Jinja2 environment, the common page context, the login
page, and the base of the page controllers behind the login."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import jinja2
import msgspec
from jinja2.sandbox import SandboxedEnvironment
from litestar import Controller, MediaType, Request, Response
from litestar.di import Provide
from litestar.exceptions import NotAuthorizedException
from litestar.response import Redirect
from litestar.utils.scope.state import ScopeState

from backend.auth.policy import Permission, allows
from backend.runtime import Runtime
from backend.web.authentication import provide_db, provide_runtime
from backend.web.guards import EXPLAIN_REFUSAL, PRINCIPAL_KEY, provide_principal
from frontend import display

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"

ENV = SandboxedEnvironment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=jinja2.select_autoescape(default=True),
    undefined=jinja2.ChainableUndefined,
)
ENV.filters["tojson_pretty"] = lambda v: msgspec.json.format(
    msgspec.json.encode(v), indent=2
).decode()
display.install(ENV)


def _csrf(request: Request) -> str:
    token = ScopeState.from_scope(request.scope).csrf_token
    return token if isinstance(token, str) else ""


def render(
    request: Request, template: str, status_code: int = 200, **context: Any
) -> Response[str]:
    """Render ``template`` with the common context (user, csrf_token, request, and
    ``can(name)``: whether the caller holds a system permission, for showing links)."""
    state = request.scope.get("state", {})
    user = state.get("user")
    principal = state.get(PRINCIPAL_KEY)

    def can(name: str) -> bool:
        return allows(principal, Permission(name))

    html = ENV.get_template(template).render(
        request=request, user=user, csrf_token=_csrf(request), can=can, **context
    )
    return Response(html, status_code=status_code, media_type=MediaType.HTML)


def safe_next(value: str | None) -> str:
    """Only same-site relative paths are followed after login (no open redirect)."""
    if not value:
        return "/workflows"
    parsed = urlparse(value)
    if parsed.scheme or parsed.netloc or not value.startswith("/") or value.startswith("//"):
        return "/workflows"
    return value


def redirect_to_login(request: Request, _: Exception) -> Response[Any]:
    """Exception handler: send anonymous visitors to the login page."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return Redirect(f"/login?next={quote(target)}")


def login_page(
    request: Request,
    runtime: Runtime,
    *,
    next: str,
    error: str | None = None,
    notice: str | None = None,
    status_code: int = 200,
) -> Response[str]:
    """The login page; shows the single sign-on button when OIDC is configured."""
    settings = runtime.settings
    return render(
        request,
        "login.html",
        status_code=status_code,
        error=error,
        notice=notice,
        next=next,
        sso_name=settings.oidc_provider_name if settings.oidc_enabled else None,
    )


class LoginRequiredPages(Controller):
    """Base of the HTML page controllers behind the login: not in the OpenAPI schema, a
    request without a session is redirected to the login page, a page of an object the
    user cannot read says so (403, :data:`~backend.web.guards.EXPLAIN_REFUSAL`), handlers
    get ``db`` and ``runtime``. Declares no routes itself."""

    path = "/"
    include_in_schema = False
    opt = {EXPLAIN_REFUSAL: True}
    exception_handlers = {NotAuthorizedException: redirect_to_login}
    dependencies = {
        "db": Provide(provide_db),
        "runtime": Provide(provide_runtime, sync_to_thread=False),
        "principal": Provide(provide_principal),
    }
