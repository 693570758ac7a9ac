"""``/api/workflows/{id}/expressions``: the expression editor's field picker, live preview and
body-schema inference (docs/expressions.md, "Editing expressions")."""

from __future__ import annotations

import uuid

from litestar import Controller, post
from litestar.params import FromPath, JSONBody

from backend.api.expression_schemas import (
    CallerOut,
    FieldsIn,
    FieldsOut,
    InferredInputOut,
    InferSchemaIn,
    InferSchemaOut,
    PreviewIn,
)
from backend.auth.policy import Permission
from backend.services.workflows import expression_data as exprdata
from backend.services.workflows import pins
from backend.services.workflows import workflows as svc
from backend.web.authentication import AppRuntime, DbSession
from backend.web.guards import CurrentPrincipal, access_dependencies


class ExpressionController(Controller):
    """Reading data for expressions needs read access to the workflow (it shows the last
    run's values, as the run page does)."""

    path = "/api/v1/workflows/{workflow_id:uuid}/expressions"
    tags = ["workflows"]
    dependencies = access_dependencies()

    async def _sample(
        self, db: DbSession, runtime: AppRuntime, workflow_id: uuid.UUID, body: FieldsIn | PreviewIn
    ) -> tuple[exprdata.RunSample, str | None]:
        """The last run's data with the draft's pinned data (and then ``body.pinned``)
        standing in for step outputs, and which data that is (``None``: none)."""
        svc.check_diagram_limits(body.diagram, runtime.settings.diagram_limits())
        svc.check_json_limit(body.pinned, runtime.settings.max_json_depth, "pinned")
        stored = pins.pinned_values(await svc.get_workflow(db, workflow_id))
        sample = await exprdata.last_run_sample(db, workflow_id)
        values = {**stored, **body.pinned}
        if body.pinned or (values and sample.run_id is None):
            origin: str | None = "pinned data"
        elif sample.run_id is not None:
            origin = f"run {sample.run_id}" + (" and pinned data" if values else "")
        else:
            origin = None
        return (sample.pinned(values) if values else sample), origin

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
        principal: CurrentPrincipal,
    ) -> FieldsOut:
        """What an expression of ``node_id`` can read, grouped by source, with examples
        from the last run, the draft's pinned data standing in for the outputs of the
        steps it is pinned on (a fetched test event on the trigger); 400 naming
        ``node_id`` when it is no step."""
        sample, origin = await self._sample(db, runtime, workflow_id, data)
        inferred = await exprdata.callers_input(
            db, workflow_id, data.diagram, runtime.catalog, principal
        )
        sources = exprdata.available_fields(
            data.diagram,
            runtime.catalog,
            data.node_id,
            sample,
            inferred.schema if inferred else None,
        )
        child = exprdata.child_input(data.diagram, runtime.catalog, data.node_id)
        found = None
        if inferred is not None:
            found = InferredInputOut(
                schema=inferred.schema,
                callers=[
                    CallerOut(s.workflow_id, s.workflow, s.node_id, s.step, s.kind)
                    for s in inferred.sources
                ],
            )
        return FieldsOut(sources=sources, data_from=origin, child_input=child, inferred_input=found)

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
        principal: CurrentPrincipal,
    ) -> exprdata.Preview:
        """The expression's value against the last run's data (or pinned data), with the
        run limits; a syntax or evaluation error is part of the answer (200), with its
        position. 400 naming ``node_id`` when it is no step."""
        sample, origin = await self._sample(db, runtime, workflow_id, data)
        inferred = await exprdata.callers_input(
            db, workflow_id, data.diagram, runtime.catalog, principal
        )
        return await exprdata.preview(
            data.diagram,
            runtime.catalog,
            data.node_id,
            data.expression,
            sample,
            data_from=origin,
            trigger_input=inferred.schema if inferred else None,
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
