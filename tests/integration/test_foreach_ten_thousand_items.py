"""Shared case foreach-ten-thousand-items: a For-each is linear in its list.

The time per item is measured by ``python bench/foreach.py`` (200, 1,000 and 10,000 items;
docs/engine.md, "For-each at scale"), never here. What this test holds, on two list sizes
run for real (a For-each over ``{n}`` items, concurrency 20, body ``Set double = item.n *
2``, then a Set summing the results):

- the bytes stored per item do not grow with the list: each child's input holds the
  parent's input as ONE reference to one payload, not a copy (nor do its step records);
- the parent ends after its last child;
- the parent's API answer lists one page of children with the count per step, and
  ``GET /api/runs/{id}/children`` pages through all of them, in item order;
- advances of one run asked at once in a process fold into one more pass instead of
  queueing on the run's row lock;
- a child whose body cannot see the parent's input never reads it back (its work per
  item does not grow with the list), while a body that reads it gets it whole;
- the parent holds a large item list by reference, once: its run input, its trigger's
  input and output, the For-each's input and items are one payload, so a pass of the
  parent reads it back at most once (not in each column), and not at all from its run
  input once it started.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.db import payloads
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id

pytestmark = pytest.mark.integration

MARKER = "$railyard.payload"

_CHILD_BYTES = text(
    """
    with family as (select id from runs where parent_run_id = :root)
    select
        (select sum(pg_column_size(r.*)) from runs r where r.id in (select id from family))
      + (select coalesce(sum(pg_column_size(s.*)), 0) from step_runs s
            where s.run_id in (select id from family))
      + (select coalesce(sum(pg_column_size(e.*)), 0) from events e
            where e.run_id in (select id from family))
    """
)


async def _family(
    client: httpx.AsyncClient, mapping: dict[str, str] | None = None, *, nap: bool = False
) -> dict[str, Any]:
    """A parent For-each (concurrency 20) over ``items`` whose body is one Set of
    ``mapping`` (default ``double = item.n * 2``; with ``nap`` then a 1 s Delay), then a
    Set summing ``double``."""
    nodes = [
        node("start", "trigger.manual"),
        node("double", "control.set", mapping=mapping or {"double": "=item.n * 2"}),
    ]
    edges = [edge("start", "double")]
    if nap:  # the child is read again, without its lock, when the timer fires
        nodes.append(node("nap", "control.delay", seconds=1))
        edges.append(edge("double", "nap"))
    body = await publish(client, diagram(nodes, edges))
    return await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node(
                    "loop",
                    "control.foreach",
                    items="=items",
                    workflow_id=body["id"],
                    concurrency=20,
                ),
                node("total", "control.set", mapping={"total": "=$sum($.double)"}),
            ],
            [edge("start", "loop"), edge("loop", "total")],
        ),
    )


async def _run(
    client: httpx.AsyncClient, runtime: Runtime, parent: dict[str, Any], size: int, pad: int
) -> str:
    """Run ``parent`` over ``size`` items, each padded with ``pad`` characters (the list,
    and so the parent's input, grows with ``pad`` while each item's work stays the same)."""
    items = [{"n": i, "pad": "p" * pad} for i in range(size)]
    run_id = await start_manual(client, parent, {"items": items})
    assert await wait_for_run(runtime, run_id, timeout=120) == "succeeded"
    return run_id


async def test_foreach_ten_thousand_items(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    parent = await _family(client)
    small = await _run(client, runtime, parent, 60, 10)
    large = await _run(client, runtime, parent, 60, 2000)  # a 120 kB list instead of 1.5 kB

    detail = await run_detail(client, large)
    assert detail["output"] == {"total": sum(2 * i for i in range(60))}
    assert [r["double"] for r in steps_by_id(detail)["loop"]["output"]] == [
        2 * i for i in range(60)
    ]

    async with runtime.engine.connect() as conn:
        per_item = {
            run_id: int((await conn.execute(_CHILD_BYTES, {"root": run_id})).scalar_one()) / 60
            for run_id in (small, large)
        }
        # every child's input holds the parent's input by reference: one payload for all
        refs = (
            await conn.execute(
                text(
                    "select count(distinct input->'input'->>:m), count(*) from runs"
                    " where parent_run_id = :root and input->'input' ? :m"
                ),
                {"root": large, "m": MARKER},
            )
        ).one()
        lag = (
            await conn.execute(
                text(
                    "select p.finished_at - max(c.finished_at) from runs p"
                    " join runs c on c.parent_run_id = p.id where p.id = :root"
                    " group by p.finished_at"
                ),
                {"root": large},
            )
        ).scalar_one()
    assert tuple(refs) == (1, 60)
    # a child of the 80-times larger list stores about what a child of the small one does
    assert per_item[large] < per_item[small] * 1.2, per_item
    assert lag.total_seconds() >= 0


_PARENT_REFS = text(
    """
    select r.input->'items'->>:m, s.step_id, s.input->'items'->>:m,
           s.output->'items'->>:m, s.data->'items'->>:m
    from runs r join step_runs s on s.run_id = r.id
    where r.id = :id and s.step_id in ('start', 'loop')
    """
)


async def test_a_parent_holds_its_large_item_list_by_reference(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    parent = await _family(client)
    small = await _run(client, runtime, parent, 20, 10)  # 0.5 kB: stays inline
    large = await _run(client, runtime, parent, 30, 1000)  # 30 kB: by reference
    async with runtime.engine.connect() as conn:
        stored = {
            run_id: (await conn.execute(_PARENT_REFS, {"id": run_id, "m": MARKER})).all()
            for run_id in (small, large)
        }
    assert all(ref is None for row in stored[small] for ref in (row[0], *row[2:]))
    digest = stored[large][0][0]
    assert digest is not None
    assert {tuple(row[1:]) for row in stored[large]} == {
        ("start", digest, digest, None),
        ("loop", digest, None, digest),
    }
    # once started, the run's input is not read back (the trigger's record holds it)
    read = await runtime.execution.env.store.read_unlocked(uuid.UUID(large))
    assert read is not None
    _, state = read
    assert isinstance(state.input["items"], payloads.Unresolved)
    items = [{"n": i, "pad": "p" * 1000} for i in range(30)]
    assert state.steps["start"].output == {"items": items}
    assert state.steps["loop"].data["items"] == items
    detail = await run_detail(client, large)
    assert detail["output"] == {"total": sum(2 * i for i in range(30))}


async def test_children_are_listed_a_page_at_a_time(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    parent = await _family(client)
    run_id = await _run(client, runtime, parent, 120, 1)
    detail = (await client.get(f"/api/runs/{run_id}")).json()
    assert detail["children_count"] == {"loop": 120}
    assert [c["index"] for c in detail["children"]] == list(range(50))

    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 45, "step_id": "loop"}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get(f"/api/runs/{run_id}/children", params=params)).json()
        assert page["total"] == 120
        seen += [c["index"] for c in page["children"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(range(120))

    bad = await client.get(f"/api/runs/{run_id}/children", params={"cursor": "nonsense"})
    assert bad.status_code == 400
    assert bad.json()["field"] == "cursor"
    too_many = await client.get(f"/api/runs/{run_id}/children", params={"limit": 501})
    assert too_many.status_code == 400
    assert too_many.json()["field"] == "limit"


async def test_advances_of_one_run_fold_into_one_more_pass(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = await _family(client)
    run_id = await _run(client, runtime, parent, 3, 1)
    control = runtime.execution.control
    passes = 0
    original = control._advance_once

    async def counted(run: Any, held: Any) -> Any:
        nonlocal passes
        passes += 1
        await asyncio.sleep(0.05)  # the other advances arrive while this pass runs
        return await original(run, held)

    monkeypatch.setattr(control, "_advance_once", counted)
    await asyncio.gather(*(control.advance_run(uuid.UUID(run_id)) for _ in range(10)))
    assert passes == 2


async def test_a_child_reads_the_parent_input_only_if_its_body_can_see_it(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    blind = await _family(client)
    napping = await _family(client, nap=True)
    seeing = await _family(client, {"double": "=item.n * 2", "seen": "=$count(input.items)"})
    decoded: list[str] = []  # the payloads each state read back, by SHA-256
    resolve = payloads.resolve_values

    async def spied(db: Any, values: list[Any], known: Any = None) -> list[Any]:
        found = await resolve(db, values, known)
        decoded.extend(digest for _, digest in (known or {}).values())
        return found

    monkeypatch.setattr(payloads, "resolve_values", spied)
    shared: dict[str, str] = {}
    for name, parent in (("blind", blind), ("napping", napping), ("seeing", seeing)):
        decoded.clear()
        run_id = await _run(client, runtime, parent, 30, 2000)  # a 60 kB list
        async with runtime.engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "select r.input->'input'->>:m, t.output->'input'->>:m,"
                        " d.input->'input'->>:m, d.output, r.id from runs r"
                        " join step_runs t on t.run_id = r.id and t.step_id = 'start'"
                        " join step_runs d on d.run_id = r.id and d.step_id = 'double'"
                        " where r.parent_run_id = :root order by r.parent_index"
                    ),
                    {"root": run_id, "m": MARKER},
                )
            ).all()
        # each child's run input, trigger output and Set input hold the one reference
        (digest,) = {cell for row in rows for cell in row[:3]}
        assert digest is not None and len(rows) == 30
        shared[name] = digest
        outputs = [row[3] for row in rows]
        if name == "seeing":
            assert decoded.count(digest) >= 30  # every child read it, in full
            assert outputs == [{"double": 2 * i, "seen": 30} for i in range(30)]
        else:
            assert decoded.count(digest) == 0, f"a {name} child read back what it cannot see"
            assert outputs == [{"double": 2 * i} for i in range(30)]
        if name == "blind":
            child = str(rows[3][4])
            # the child's page and detail show its input; a re-run gets the same input
            assert (await client.get(f"/runs/{child}")).status_code == 200
            shown = (await run_detail(client, child))["input"]["input"]
            assert shown[MARKER] == digest and shown["summary"] == "object with 1 keys"
            rerun = await client.post(f"/api/runs/{child}/rerun", json={"from": "start"})
            assert rerun.status_code == 201, rerun.text
            again = rerun.json()["run_id"]
            assert await wait_for_run(runtime, again, timeout=60) == "succeeded"
            async with runtime.engine.connect() as conn:
                stored_input, output = (
                    await conn.execute(
                        text("select input, output from runs where id = :id"), {"id": again}
                    )
                ).one()
                (full,) = await resolve(conn, [stored_input])
            items = [{"n": i, "pad": "p" * 2000} for i in range(30)]
            assert full == {"item": items[3], "index": 3, "input": {"items": items}}
            assert output == {"double": 6}
        detail = await run_detail(client, run_id)
        assert detail["output"] == {"total": sum(2 * i for i in range(30))}
    assert len(set(shared.values())) == 1  # the same parent input, stored once
