"""Pages for connectors: the catalog (``/catalog``) and credentials (``/credentials``).

``/catalog`` lists every installed connector (version, source distribution, node types
with their descriptions and config fields, credential types) and, to admins, the
connectors that failed to load and why (others see how many). ``/catalog/icons/...``
serves the node-type icons: the Lucide sprite and the plugins' own SVG icons (sanitised
when the plugin loaded; backend/services/connectors/icons.py). ``/credentials`` lists credentials
(masked), creates one from a form generated from the credential type's JSON Schema
(secret inputs are ``type=password`` and never pre-filled), deletes, and links OAuth2
credentials to *Connect*. Secrets are never rendered: templates only receive
:class:`backend.services.connectors.credentials.CredentialView`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from litestar import Request, Response, get, post
from litestar.exceptions import NotFoundException
from litestar.params import FromPath, FromQuery, URLEncodedBody
from litestar.response import Redirect

from backend import crypto
from backend.auth.policy import Level, Permission, Principal
from backend.runtime import Runtime
from backend.services.connectors import credentials as creds
from backend.services.connectors import icons
from backend.services.identity import access
from backend.services.identity.identity import Identity
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import CurrentPrincipal
from frontend.rendering import LoginRequiredPages, render


def _svg(data: bytes) -> Response[bytes]:
    """An icon answer; its restrictive Content-Security-Policy comes from
    backend/web/security_headers.py (``/catalog/icons/``)."""
    return Response(
        data, media_type="image/svg+xml", headers={"cache-control": "private, max-age=3600"}
    )


def _return_path(value: str) -> str:
    """A same-site path to go back to after creating a credential, or ``""``."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        return ""
    return value


def _with_param(path: str, name: str, value: str) -> str:
    return f"{path}{'&' if '?' in path else '?'}{urlencode({name: value})}"


def _type_forms(runtime: Runtime) -> list[dict[str, Any]]:
    forms = []
    for ctype in runtime.catalog.credential_types.values():
        schema = ctype.json_schema()
        required = set(schema.get("required") or ())
        fields = []
        for name, prop in schema["properties"].items():
            fields.append(
                {
                    "name": name,
                    "title": prop.get("title") or name.replace("_", " ").capitalize(),
                    "description": prop.get("description", ""),
                    "secret": bool(prop.get("writeOnly")),
                    "required": name in required,
                    "enum": prop.get("enum"),
                    "boolean": prop.get("type") == "boolean",
                    "integer": prop.get("type") == "integer",
                    "default": prop.get("default"),
                }
            )
        forms.append(
            {
                "name": ctype.name,
                "label": ctype.label,
                "kind": ctype.kind,
                "description": ctype.description,
                "fields": fields,
            }
        )
    return sorted(forms, key=lambda f: f["label"].lower())


def _form_data(ctype: Any, form: dict[str, str]) -> dict[str, Any]:
    """Typed field values from an url-encoded form (empty inputs are left out)."""
    props = ctype.json_schema()["properties"]
    data: dict[str, Any] = {}
    for name, prop in props.items():
        key = f"field.{name}"
        if prop.get("type") == "boolean":
            data[name] = form.get(key) == "on"
            continue
        value = form.get(key, "")
        if value == "":
            continue
        if prop.get("type") == "integer":
            try:
                data[name] = int(value)
            except ValueError:
                raise creds.CredentialError(f"{name} must be a whole number", field=name) from None
        else:
            data[name] = value
    return data


async def _listing(
    db: DbSession, runtime: Runtime, principal: Principal
) -> tuple[list[creds.CredentialView], set[str]]:
    """The credentials the user may use, and the ids of those it may manage (delete)."""
    usable = await access.credential_filter(db, principal)
    items = await creds.list_credentials(db, runtime.catalog, visible=usable)
    managed = await access.credential_filter(db, principal, Level.MANAGE)
    return items, {v.id for v in await creds.list_credentials(db, runtime.catalog, visible=managed)}


class ConnectorPages(LoginRequiredPages):
    """Catalog and credentials pages (login required)."""

    @get("/catalog", operation_id="page_catalog", opt={"permission": Permission.AUTHENTICATED})
    async def catalog_page(
        self, request: Request[Any, Any, Any], runtime: AppRuntime, principal: CurrentPrincipal
    ) -> Response[str]:
        """Installed connectors, their node types and docs, and the connectors that failed
        to load (the reasons for admins only: they can name paths and package internals)."""
        catalog = runtime.catalog
        connectors = []
        for info in sorted(catalog.connectors, key=lambda c: c.label.lower()):
            specs = [catalog.specs[t] for t in info.node_types if t in catalog.specs]
            connectors.append({"info": info, "specs": specs})
        core = [s for s in catalog.all() if s.connector == "core"]
        return render(
            request,
            "catalog.html",
            connectors=connectors,
            core=core,
            errors=catalog.errors if principal.is_admin else [],
            error_count=len(catalog.errors),
        )

    @get(
        "/catalog/icons/lucide.svg",
        operation_id="page_icon_sprite",
        opt={"permission": Permission.AUTHENTICATED},
    )
    async def icon_sprite(self) -> Response[bytes]:
        """The Lucide icons Railyard ships, one ``<symbol id="<name>">`` each
        (``image/svg+xml``)."""
        return _svg(icons.lucide_sprite())

    @get(
        "/catalog/icons/{connector:str}/{name:str}",
        operation_id="page_plugin_icon",
        opt={"permission": Permission.AUTHENTICATED},
    )
    async def plugin_icon(
        self, runtime: AppRuntime, connector: FromPath[str], name: FromPath[str]
    ) -> Response[bytes]:
        """A plugin's own icon ``<name>.svg``, as sanitised when the plugin loaded
        (``image/svg+xml``); 404 for an icon no loaded connector ships."""
        stem = name.removesuffix(".svg")
        svg = runtime.catalog.icon_svg(connector, stem) if name.endswith(".svg") else None
        if svg is None:
            raise NotFoundException(f"connector {connector!r} has no icon {name!r}")
        return _svg(svg)

    @get(
        "/credentials",
        operation_id="page_credentials",
        opt={"permission": Permission.CREDENTIAL_LIST},
    )
    async def credentials_page(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        type: FromQuery[str] = "",
        connected: FromQuery[str] = "",
        error: FromQuery[str] = "",
        next: FromQuery[str] = "",
    ) -> Response[str]:
        """List (masked) and the create form (``?type=`` preselects a credential type;
        ``?next=<same-site path>`` returns there after saving, with ``credential=<id>``)."""
        items, manageable = await _listing(db, runtime, principal)
        return render(
            request,
            "credentials.html",
            credentials=items,
            manageable=manageable,
            types=_type_forms(runtime),
            selected_type=type,
            connected=connected,
            error=error,
            form_error=None,
            next_path=_return_path(next),
        )

    @post(
        "/credentials",
        operation_id="page_create_credential",
        opt={"permission": Permission.CREDENTIAL_CREATE},
    )
    async def create_credential(
        self,
        request: Request[Any, Any, Any],
        db: DbSession,
        runtime: AppRuntime,
        principal: CurrentPrincipal,
        data: URLEncodedBody[dict[str, str]],
    ) -> Response[Any]:
        """Create from the form; on error re-render with the message (secrets not echoed)."""
        user: Identity = request.scope["state"]["user"]
        type_name = data.get("type", "")
        try:
            ctype = runtime.catalog.credential_type(type_name)
            if ctype is None:
                raise creds.CredentialError(f"unknown credential type {type_name!r}", field="type")
            view = await creds.create_credential(
                db,
                runtime.catalog,
                crypto.keyring_from_settings(runtime.settings),
                name=data.get("name", ""),
                type_name=type_name,
                data=_form_data(ctype, data),
                user_id=user.id,
            )
        except (creds.CredentialError, crypto.CryptoError) as exc:
            items, manageable = await _listing(db, runtime, principal)
            return render(
                request,
                "credentials.html",
                status_code=400,
                credentials=items,
                manageable=manageable,
                types=_type_forms(runtime),
                selected_type=type_name,
                connected="",
                error="",
                form_error=getattr(exc, "message", str(exc)),
                form_name=data.get("name", ""),
                next_path=_return_path(data.get("next", "")),
            )
        back = _return_path(data.get("next", ""))
        if back and view.kind != "oauth2":  # an OAuth2 credential still needs Connect here
            return Redirect(_with_param(back, "credential", view.id))
        return Redirect(f"/credentials#credential-{view.id}")

    @post(
        "/credentials/{credential_id:str}/delete",
        operation_id="page_delete_credential",
        opt={"permission": Permission.CREDENTIAL_MANAGE},
    )
    async def delete_credential(
        self, request: Request[Any, Any, Any], db: DbSession, credential_id: FromPath[str]
    ) -> Redirect:
        """Delete and go back to the list."""
        user: Identity = request.scope["state"]["user"]
        try:
            await creds.delete_credential(db, credential_id, user_id=user.id)
        except creds.CredentialNotFound:
            return Redirect("/credentials?error=credential%20not%20found")
        return Redirect("/credentials")
