"""The run page of a For-each parent with 10,000 child runs opens in Chromium at once and
lists its children a page at a time (case foreach-ten-thousand-items, docs/engine.md
"For-each at scale").

The parent is a real For-each run over 40 items whose 40 children really ran; its
children are then copied in PostgreSQL to 10,000 (the same child row with indexes 40 to
9,999): what the run page reads and lists are those child rows, and running 10,000 bodies
here would take minutes (their throughput is bench/foreach.py's measure). The time from
navigation to the page's ``load`` event is printed and the page saved as a screenshot;
what the test holds is the page's shape: one page of 50 child links with the count, a
working "next" link, and a document whose size does not grow with the children.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from e2e.api_client import api_client, node, publish
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login

pytestmark = pytest.mark.e2e

RAN = 40
ITEMS = 10_000

_COPY_CHILDREN = [
    "CREATE TEMP TABLE proto AS SELECT * FROM runs WHERE parent_run_id = $1 AND parent_index = 0",
    "CREATE TEMP TABLE copies AS SELECT proto.*, g FROM proto, generate_series($1::int, $2::int) g",
    "UPDATE copies SET id = gen_random_uuid(), parent_index = g, idempotency_key = NULL",
    "ALTER TABLE copies DROP COLUMN g",
    "INSERT INTO runs SELECT * FROM copies",
]


async def _copy_children(data_dir: Path, parent: str) -> None:
    """Copy child 0 of run ``parent`` to indexes :data:`RAN`..:data:`ITEMS` - 1."""
    port = int((data_dir / "postgres" / "postmaster.pid").read_text().splitlines()[3])
    conn = await asyncpg.connect(host="127.0.0.1", port=port, user="railyard", database="railyard")
    try:
        async with conn.transaction():
            await conn.execute(_COPY_CHILDREN[0], uuid.UUID(parent))
            await conn.execute(_COPY_CHILDREN[1], RAN, ITEMS - 1)
            for statement in _COPY_CHILDREN[2:]:
                await conn.execute(statement)
    finally:
        await conn.close()


def test_run_page_of_ten_thousand_children(page: Any, railyard_server: RailyardServer) -> None:
    api = api_client(railyard_server)
    body = publish(
        api,
        "foreach body",
        node("start", "trigger.manual", 0),
        node("double", "control.set", 200, mapping={"double": "=item.n * 2"}),
    )
    parent = publish(
        api,
        "foreach ten thousand",
        node("start", "trigger.manual", 0),
        node("loop", "control.foreach", 200, items="=items", workflow_id=body, concurrency=10),
    )
    run_id = api.start_run(parent, {"items": [{"n": i} for i in range(RAN)]}).id
    assert api.wait_for_run(run_id, timeout=180).status == "succeeded"
    # Playwright's sync API holds this thread's event loop: the copy runs in another thread
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _copy_children(railyard_server.data_dir, run_id)).result()
    detail = api.get(f"/api/v1/runs/{run_id}").json()
    assert detail["children_count"] == {"loop": ITEMS}
    assert len(detail["children"]) == 50
    assert len(api.get(f"/api/v1/runs/{run_id}").content) < 200_000

    login(page, railyard_server)
    t0 = time.perf_counter()
    page.goto(f"{railyard_server.base_url}/runs/{run_id}", wait_until="load")
    opened = time.perf_counter() - t0
    print(f"figure: run_page_10000_children_load = {opened:.3f} s")
    page.screenshot(path=str(ARTIFACTS_DIR / "foreach-10000-children.png"), full_page=False)
    step = page.locator('section.step[data-step-id="loop"]')
    assert step.locator("a.child-run-link").count() == 50
    assert "50 of 10000 shown" in step.locator(".child-runs").inner_text()
    assert len(page.content()) < 2_000_000

    step.locator("a.child-runs-next").click()
    page.wait_for_load_state("load")
    step = page.locator('section.step[data-step-id="loop"]')
    assert step.locator("a.child-run-link").first.inner_text().startswith("#50")
    assert step.locator("a.child-runs-first").count() == 1
