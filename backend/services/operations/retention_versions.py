"""Retention of workflow versions (the product brief: workflow metadata kept 5 years).

A published version goes when it was published more than ``RAILYARD_RETENTION_VERSIONS_DAYS``
ago (default 1,826 days: five years), or when its workflow has at least
``RAILYARD_RETENTION_VERSIONS_MAX`` newer published versions (0: no count rule), unless
something still needs it. A version stays while it is:

- the workflow's active (current published) version;
- a draft snapshot (``kind = 'draft'``: what test runs of the draft execute);
- referenced by a run that retention kept (``runs.version_id``; a run going by the
  ``runs`` class frees its version for the next pass);
- pinned by the workflow's schedule (``schedules.version_number``);
- pinned by a Sub-workflow or For-each step (config ``workflow_id`` and ``version``,
  backend/services/identity/references.py) in another workflow's active version, in a draft, or in a
  version a run that has not ended executes.

The workflow itself (name, draft, tags, owner, grants) is never removed by retention:
deleting a workflow stays a user's decision (audited).

Batches like every class (backend/services/operations/retention.py): at most
``RAILYARD_RETENTION_BATCH``
versions per short transaction, locked ``FOR UPDATE SKIP LOCKED``; the ``runs.version_id``
index (migration 0023_version_retention) keeps the "referenced by a run" test and the
foreign key check of each delete from scanning the runs.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from backend.services.identity.references import CALL_NODE_TYPES

_CALLS = ", ".join(f"'{t}'" for t in sorted(CALL_NODE_TYPES))
_ENDED = "('succeeded','failed','cancelled','timed_out')"

PINS = f"""
with diagrams as (
  select av.diagram as d from workflows w
    join workflow_versions av on av.workflow_id = w.id and av.kind = 'published'
                              and av.number = w.active_version
  union all
  select w.draft from workflows w
  union all
  select rv.diagram from workflow_versions rv
   where rv.id in (select version_id from runs where status not in {_ENDED})
)
select distinct n -> 'config' ->> 'workflow_id' as workflow_id,
                n -> 'config' ->> 'version' as version
  from diagrams, jsonb_array_elements(
         case when jsonb_typeof(d -> 'nodes') = 'array' then d -> 'nodes' else '[]' end) n
 where n ->> 'type' in ({_CALLS})
   and coalesce(n -> 'config' ->> 'version', '') <> ''
"""
"""Every ``(workflow_id, version)`` pinned by a call step that may still run (as text)."""

PRUNE = f"""
with pins as ({PINS})
delete from workflow_versions where id in (
  select v.id from workflow_versions v
    join workflows w on w.id = v.workflow_id
   where v.kind = 'published'
     and v.number is distinct from w.active_version
     and (v.created_at < cast(:cutoff as timestamptz)
          or (:keep > 0 and (select count(*) from workflow_versions newer
                              where newer.workflow_id = v.workflow_id
                                and newer.kind = 'published'
                                and newer.number > v.number) >= :keep))
     and not exists (select 1 from runs r where r.version_id = v.id)
     and not exists (select 1 from schedules s
                      where s.workflow_id = v.workflow_id and s.version_number = v.number)
     and not exists (select 1 from pins p
                      where p.workflow_id = cast(v.workflow_id as text)
                        and p.version = cast(v.number as text))
   order by v.created_at
   limit :n
     for update of v skip locked)
"""


async def prune_batch(session: AsyncSession, cutoff: datetime | None, keep: int, size: int) -> int:
    """Delete at most ``size`` prunable versions (see the module docstring): published
    before ``cutoff`` (None: no age rule) or with ``keep`` (0: no count rule) newer
    published versions of their workflow. Returns how many went."""
    result = await session.execute(text(PRUNE), {"cutoff": cutoff, "keep": keep, "n": size})
    return int(getattr(result, "rowcount", 0) or 0)
