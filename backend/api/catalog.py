"""``/api/catalog``: node types for the designer's palette and config forms."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get
from litestar.di import Provide

from backend.auth.policy import Permission
from backend.web.authentication import AppRuntime, provide_runtime
from backend.web.guards import CurrentPrincipal, provide_principal
from designer_schema.catalog import NodeTypeSpec


class CatalogController(Controller):
    """The node-type catalog and connector load errors."""

    path = "/api/v1/catalog"
    tags = ["catalog"]
    dependencies = {
        "runtime": Provide(provide_runtime, sync_to_thread=False),
        "principal": Provide(provide_principal),
    }

    @get("/", operation_id="get_catalog", opt={"permission": Permission.AUTHENTICATED})
    async def catalog(self, runtime: AppRuntime, principal: CurrentPrincipal) -> dict[str, Any]:
        """``{"node_types": [...], "connectors": [...], "errors": [...], "error_count": n}``:
        ``errors`` says why each connector that failed to load did, for admins only (it
        can name paths and package internals); others get ``[]`` and the count."""
        node_types: list[NodeTypeSpec] = runtime.catalog.all()
        errors = runtime.catalog.errors
        return {
            "node_types": node_types,
            "connectors": [c.__dict__ for c in runtime.catalog.connectors],
            "errors": errors if principal.is_admin else [],
            "error_count": len(errors),
        }
