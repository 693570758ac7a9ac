"""``/api/catalog``: node types for the designer's palette and config forms."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get
from litestar.di import Provide

from backend.auth.policy import Permission
from backend.auth.web import AppRuntime, provide_runtime
from designer_schema.catalog import NodeTypeSpec


class CatalogController(Controller):
    """The node-type catalog and connector load errors."""

    path = "/api/catalog"
    tags = ["catalog"]
    dependencies = {"runtime": Provide(provide_runtime, sync_to_thread=False)}

    @get("/", operation_id="get_catalog", opt={"permission": Permission.AUTHENTICATED})
    async def catalog(self, runtime: AppRuntime) -> dict[str, Any]:
        """``{"node_types": [...], "connectors": [...], "errors": [...]}``."""
        node_types: list[NodeTypeSpec] = runtime.catalog.all()
        return {
            "node_types": node_types,
            "connectors": [c.__dict__ for c in runtime.catalog.connectors],
            "errors": runtime.catalog.errors,
        }
