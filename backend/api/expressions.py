"""``/api/workflows/{id}/expressions``: the expression editor's field picker, live preview and
body-schema inference (docs/expressions.md, "Editing expressions")."""

from __future__ import annotations

import uuid

from litestar import Controller, post
from litestar.params import FromPath, JSONBody

from backend.api.expression_schemas import (
    FieldsIn,
    FieldsOut,
    InferSchemaIn,
    InferSchemaOut,
    PreviewIn,
)
from backend.auth.guards import access_dependencies
from backend.auth.policy import Permission
from backend.auth.web import AppRuntime, DbSession
from backend.services import expression_data as exprdata
from backend.services import workflows as svc


class ExpressionController(Controller):
    """Reading data for expressions needs read access to the workflow (it shows the last
    run's values, as the run page does)."""

    path = "/api/workflows/{workflow_id:uuid}/expressions"
    tags = ["workflows"]
    dependencies = access_dependencies()

    async def _sample(
        self, db: DbSession, runtime: AppRuntime, workflow_id: uuid.UUID, body: FieldsIn | PreviewIn
    ) -> exprdata.RunSample:
        svc.check_diagram_limits(body.diagram, runtime.settings.diagram_limits())
        svc.check_json_limit(body.pinned, runtime.settings.max_json_depth, "pinned")
        await svc.get_workflow(db, workflow_id)
        sample = await exprdata.last_run_sample(db, workflow_id)
        return sample.pinned(body.pinned) if body.pinned else sample

    @post(
        "/fields",
        operation_id="expression_fields",
        opt={"permission": Permission.WORKFLOW_READ},
        status_code=200,
    )
    async def fields(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[FieldsIn],
        db: DbSession,
        runtime: AppRuntime,
    ) -> FieldsOut:
        """What an expression of ``node_id`` can read, grouped by source, with examples
        from the last run (or pinned data); 400 naming ``node_id`` when it is no step."""
        sample = await self._sample(db, runtime, workflow_id, data)
        sources = exprdata.available_fields(data.diagram, runtime.catalog, data.node_id, sample)
        origin = (
            "pinned data" if data.pinned else (f"run {sample.run_id}" if sample.run_id else None)
        )
        return FieldsOut(sources=sources, data_from=origin)

    @post(
        "/preview",
        operation_id="expression_preview",
        opt={"permission": Permission.WORKFLOW_READ},
        status_code=200,
    )
    async def preview(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[PreviewIn],
        db: DbSession,
        runtime: AppRuntime,
    ) -> exprdata.Preview:
        """The expression's value against the last run's data (or pinned data), with the
        run limits; a syntax or evaluation error is part of the answer (200), with its
        position. 400 naming ``node_id`` when it is no step."""
        sample = await self._sample(db, runtime, workflow_id, data)
        return await exprdata.preview(
            data.diagram,
            runtime.catalog,
            data.node_id,
            data.expression,
            sample,
            pinned=bool(data.pinned),
        )

    @post(
        "/infer-schema",
        operation_id="infer_body_schema",
        opt={"permission": Permission.WORKFLOW_READ},
        status_code=200,
    )
    async def infer_schema(
        self,
        workflow_id: FromPath[uuid.UUID],
        data: JSONBody[InferSchemaIn],
        db: DbSession,
        runtime: AppRuntime,
    ) -> InferSchemaOut:
        """A JSON Schema of ``sample``, of the last test call's body or of the newest run's
        body (400 on ``source`` when there is none yet)."""
        svc.check_json_limit(data.sample, runtime.settings.max_json_depth, "sample")
        await svc.get_workflow(db, workflow_id)
        schema, origin = await exprdata.infer_body_schema(db, workflow_id, data.source, data.sample)
        return InferSchemaOut(schema=schema, source=origin)
