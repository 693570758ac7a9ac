"""The Elasticsearch backend: searches through the official async client
(``elasticsearch.AsyncElasticsearch`` over httpx), installs the index templates, takes the
indexer's bulk requests, and re-indexes everything from PostgreSQL.

Permission filtering is the same as on PostgreSQL: the caller's readable workflow ids
become a ``terms`` filter. ``workflow:`` (by name) and ``tag:`` are resolved to workflow ids
in PostgreSQL, where names and tags live, so renaming or re-tagging a workflow needs no
re-indexing of its runs.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from sqlalchemy import Text, cast, func, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Event, Workflow
from backend.search.criteria import Criteria, Filter
from backend.search.es_documents import (
    KINDS,
    audit_document,
    bulk_operations,
    index_name,
    index_template,
    run_document,
    workflow_document,
)
from backend.search.es_indexer import SinkUnavailable
from backend.search.es_loading import audit_rows, load_workflows, runs_after
from backend.search.es_requests import WorkflowInfo, read_response, search_body
from backend.search.model import PAGE_SIZE, SearchResult, Visibility
from backend.search.query import Scope
from backend.settings import Settings

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 429, 500, 502, 503, 504}


def make_client(url: str, **options: Any) -> Any:
    """An ``AsyncElasticsearch`` client of ``url`` over httpx (no aiohttp needed)."""
    from elastic_transport import HttpxAsyncHttpNode
    from elasticsearch import AsyncElasticsearch

    return AsyncElasticsearch(url, node_class=HttpxAsyncHttpNode, **options)


class ElasticSearch:
    """:class:`~backend.search.model.SearchBackend` and indexer sink over Elasticsearch.

    ``client``: an ``AsyncElasticsearch``; ``sessionmaker``: PostgreSQL, for names and
    tags; ``prefix``: index name prefix (``<prefix>-runs``, ...).
    """

    name = "elasticsearch"

    def __init__(
        self, client: Any, sessionmaker: async_sessionmaker[AsyncSession], prefix: str
    ) -> None:
        self.client = client
        self.sessionmaker = sessionmaker
        self.prefix = prefix

    @classmethod
    def from_settings(
        cls, settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> ElasticSearch:
        """The backend of ``RAILYARD_ELASTICSEARCH_URL``; raises ``ValueError`` without one."""
        if not settings.elasticsearch_url:
            raise ValueError(
                "RAILYARD_SEARCH_BACKEND=elasticsearch needs RAILYARD_ELASTICSEARCH_URL"
            )
        client = make_client(settings.elasticsearch_url, request_timeout=10)
        return cls(client, sessionmaker, settings.search_index_prefix)

    async def close(self) -> None:
        """Close the client's connections."""
        await self.client.close()

    # ---- setup and indexing ------------------------------------------------------

    async def ensure_indexes(self) -> None:
        """Install the index templates and create missing indexes (idempotent)."""
        for kind in KINDS:
            name = index_name(self.prefix, kind)
            body = index_template(self.prefix, kind)
            await self.client.indices.put_index_template(name=name, **body)
            if not await self.client.indices.exists(index=name):
                await self.client.indices.create(index=name)

    async def bulk(self, operations: list[dict[str, Any]]) -> None:
        """Send one ``_bulk`` request; :class:`SinkUnavailable` unless every item was
        accepted (``404`` for a delete counts as done)."""
        from elastic_transport import ConnectionError as TransportConnectionError
        from elastic_transport import ConnectionTimeout
        from elasticsearch import ApiError

        try:
            response = await self.client.bulk(operations=operations, refresh=False)
        except (TransportConnectionError, ConnectionTimeout) as exc:
            raise SinkUnavailable(f"cannot reach Elasticsearch: {exc}") from exc
        except ApiError as exc:
            raise SinkUnavailable(f"Elasticsearch refused the bulk request: {exc}") from exc
        body = response.body if hasattr(response, "body") else response
        if body.get("errors"):
            failed = [
                item
                for entry in body.get("items", [])
                for action, item in entry.items()
                if item.get("status", 500) >= 300
                and not (action == "delete" and item.get("status") == 404)
            ]
            if failed:
                raise SinkUnavailable(
                    f"{len(failed)} document(s) refused, first: {failed[0].get('error')}"
                )

    async def delete_runs_of(self, workflow_id: str) -> None:
        """Delete the run documents of a deleted workflow."""
        from elasticsearch import ApiError

        try:
            await self.client.delete_by_query(
                index=index_name(self.prefix, "runs"),
                query={"term": {"workflow_id": workflow_id}},
                conflicts="proceed",
            )
        except ApiError as exc:
            raise SinkUnavailable(f"cannot delete runs of {workflow_id}: {exc}") from exc

    async def reindex(self, *, batch: int = 1000) -> dict[str, int]:
        """Rebuild every document from PostgreSQL; returns counts per kind. The indexer's
        event cursor is left where it is (documents are idempotent); when it has none, it
        starts shortly before the newest event (docs/search.md)."""
        await self.ensure_indexes()
        counts = {kind: 0 for kind in KINDS}
        async with self.sessionmaker() as session:
            after: uuid.UUID | None = None
            while rows := await runs_after(session, after, batch):
                docs = [run_document(r) for r in rows]
                await self.bulk(bulk_operations(index_name(self.prefix, "runs"), docs))
                counts["runs"] += len(docs)
                after = rows[-1]["id"]
            workflows = await load_workflows(session)
            docs = [workflow_document(w) for w in workflows.values() if not w["archived"]]
            if docs:
                await self.bulk(bulk_operations(index_name(self.prefix, "workflows"), docs))
            counts["workflows"] = len(docs)
            async for chunk in audit_rows(session, batch):
                docs = [audit_document(r) for r in chunk]
                await self.bulk(bulk_operations(index_name(self.prefix, "audit"), docs))
                counts["audit"] += len(docs)
        await self.client.indices.refresh(index=",".join(index_name(self.prefix, k) for k in KINDS))
        return counts

    # ---- search -----------------------------------------------------------------

    async def _resolve(self, session: AsyncSession, criteria: Criteria) -> None:
        """Replace ``workflow:`` names and ``tag:`` by the matching workflow ids."""
        resolved: list[Filter] = []
        for f in criteria.filters:
            if criteria.scope is Scope.RUNS and f.field in ("workflow", "tag"):
                if f.field == "tag":
                    cond = Workflow.tags.overlap(cast([str(v) for v in f.values], ARRAY(Text)))
                else:
                    ids = [v for v in f.values if _is_uuid(str(v))]
                    names = [str(v).lower() for v in f.values]
                    cond = func.lower(Workflow.name).in_(names)
                    if ids:
                        cond = cond | Workflow.id.in_([uuid.UUID(str(i)) for i in ids])
                found = (await session.execute(select(Workflow.id).where(cond))).scalars()
                values = tuple(str(i) for i in found) or ("(none)",)
                resolved.append(Filter("workflow_id", values, f.negated))
            else:
                resolved.append(f)
        criteria.filters = resolved

    async def search(
        self,
        criteria: Criteria,
        visible: Visibility,
        *,
        query: str,
        limit: int = PAGE_SIZE,
        cursor: str | None = None,
    ) -> SearchResult:
        """One page of results (see :class:`~backend.search.model.SearchBackend`)."""
        criteria.drop_unranked_relevance()
        async with self.sessionmaker() as session:
            await self._resolve(session, criteria)
            body = search_body(criteria, visible, limit=limit, cursor=cursor)
            response = await self.client.search(
                index=index_name(self.prefix, criteria.scope.value), **body
            )
            raw = response.body if hasattr(response, "body") else response
            workflows: dict[str, WorkflowInfo] = {}
            if criteria.scope is Scope.RUNS:
                ids = {h["_source"]["workflow_id"] for h in raw["hits"]["hits"]}
                ids |= {
                    str(b["key"])
                    for b in raw.get("aggregations", {}).get("workflow", {}).get("buckets", [])
                }
                rows = await session.execute(
                    select(Workflow.id, Workflow.name, Workflow.tags).where(
                        Workflow.id.in_([uuid.UUID(i) for i in ids if _is_uuid(i)])
                    )
                )
                workflows = {str(i): WorkflowInfo(n, tuple(t or ())) for i, n, t in rows}
        return read_response(raw, criteria, query=query, limit=limit, workflows=workflows)

    async def newest_event_id(self) -> int:
        """The newest outbox event id (for lag measurements)."""
        async with self.sessionmaker() as session:
            return int((await session.execute(select(func.max(Event.id)))).scalar() or 0)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
