"""The API's responsiveness while anonymous callers post CPU-heavy bodies to a webhook.

Issue 29, finding 3 (case api-loop-not-stalled-by-webhooks): a published Webhook -> Set
whose field sorts the body's list with a custom comparator
(``$sort(body.items, function($a, $b) { $a > $b })``); ``--clients`` (8) anonymous clients
post ~1 MB bodies of 140,000 numbers to it back to back, while a signed-in user asks for
the workflow list (``GET /api/v1/workflows``) and a probe asks ``GET /health/live``, each every
``--interval`` (0.1 s). The same two are first measured with no load. Runs on the embedded
stack (bench/cluster.py): one ``railyard api``, ``--workers`` (1) ``railyard worker``.

Figures (``figure: <name> = <value> <unit>``): p50/p99/max latency of the list route and of
/health/live, idle and under load (ms); the target (100 ms p99 under load) printed beside
them; the webhook posts answered and their statuses; runs stored. Bounded: ``--seconds``
(20) of load, requests only to 127.0.0.1.

Run: ``python bench/api_loop.py`` (``--quick``: 6 s of load).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
from railyard_client import AsyncClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cluster import Stack  # noqa: E402
from bench.common import figure, load_average, percentile  # noqa: E402
from bench.webhooks import edge, node  # noqa: E402

EMAIL = "loop-bench@example.com"
PASSWORD = "amber signal lamp at dusk"
TARGET_P99_MS = 100.0
SORT = "=$sort(body.items, function($a, $b) { $a > $b })"


def heavy_diagram() -> dict[str, Any]:
    """Webhook (answers 202 at once) -> a Set sorting the body's list with a comparator."""
    return {
        "nodes": [
            node("hook", "trigger.webhook", 0),
            node("sort", "control.set", 200, mapping={"sorted": SORT}),
        ],
        "edges": [edge("hook", "sort")],
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


async def setup(env: dict[str, str]) -> str:
    """The signed-in user (an editor) and the published workflow; its webhook token."""
    from backend.runtime import build_runtime
    from backend.services.identity import accounts
    from backend.services.workflows import workflows
    from backend.settings import load_settings
    from designer_schema.diagram import Diagram

    rt = await build_runtime(load_settings(environ=env), pool_size=2)
    try:
        async with rt.sessionmaker() as session, session.begin():
            user = await accounts.create_user(session, EMAIL, PASSWORD, role="editor")
            wf = await workflows.create_workflow(session, "loop bench", user.id)
            diagram = msgspec.convert(heavy_diagram(), Diagram)
            await workflows.save_draft(session, wf.id, diagram, rt.catalog)
            await workflows.publish(session, wf.id, rt.catalog, user.id)
            return str(wf.webhook_token)
    finally:
        await rt.close()


async def signed_in(base: str) -> AsyncClient:
    """A railyard-client of ``base`` signed in as :data:`EMAIL` (a login session)."""
    client = AsyncClient(base, timeout=30)
    await client.login(EMAIL, PASSWORD)
    return client


async def sample(
    get: Callable[[str], Awaitable[httpx.Response]],
    path: str,
    stop: asyncio.Event,
    interval: float,
) -> list[float]:
    """Latencies (seconds) of ``get(path)`` every ``interval`` seconds until ``stop``."""
    found: list[float] = []
    while not stop.is_set():
        t0 = time.perf_counter()
        r = await get(path)
        found.append(time.perf_counter() - t0)
        r.raise_for_status()
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass
    return found


async def measure(
    base: str, seconds: float, interval: float, load: Any = None
) -> dict[str, list[float]]:
    """Sample the list route and /health/live for ``seconds``, with ``load()`` running."""
    stop = asyncio.Event()
    user = await signed_in(base)
    probe = httpx.AsyncClient(base_url=base, timeout=30, trust_env=False)
    try:
        tasks = [
            asyncio.create_task(sample(user.get, "/api/v1/workflows", stop, interval)),
            asyncio.create_task(sample(probe.get, "/health/live", stop, interval)),
        ]
        loader = asyncio.create_task(load(stop)) if load is not None else None
        await asyncio.sleep(seconds)
        stop.set()
        lists, lives = await asyncio.gather(*tasks)
        if loader is not None:
            await loader
    finally:
        await user.aclose()
        await probe.aclose()
    return {"list": lists, "live": lives}


def bodies(count: int) -> list[bytes]:
    """``count`` bodies of about 1 MB: 140,000 numbers each."""
    return [
        msgspec.json.encode({"items": [random.randrange(100_000, 999_999) for _ in range(140_000)]})
        for _ in range(count)
    ]


def report(phase: str, found: dict[str, list[float]]) -> None:
    for route, latencies in found.items():
        ms = [s * 1000 for s in latencies]
        figure(f"{route}_{phase}_p50", percentile(ms, 0.5), "ms")
        figure(f"{route}_{phase}_p99", percentile(ms, 0.99), "ms")
        figure(f"{route}_{phase}_max", max(ms) if ms else float("nan"), "ms")
        figure(f"{route}_{phase}_samples", len(ms), "requests")


async def run(args: argparse.Namespace, stack: Stack) -> None:
    token = await setup(stack.env)
    _, base = stack.api()
    for _ in range(args.workers):
        stack.worker()
    hook = f"{base}/hooks/{token}"
    posted: dict[int, int] = {}
    payloads = bodies(args.clients)

    async def flood(stop: asyncio.Event) -> None:
        async def one(i: int) -> None:
            async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
                while not stop.is_set():
                    r = await client.post(
                        hook, content=payloads[i], headers={"content-type": "application/json"}
                    )
                    posted[r.status_code] = posted.get(r.status_code, 0) + 1

        await asyncio.gather(*(one(i) for i in range(args.clients)))

    report("idle", await measure(base, min(args.seconds, 10), args.interval))
    loaded = await measure(base, args.seconds, args.interval, flood)
    report("loaded", loaded)
    figure("target_p99", TARGET_P99_MS, "ms")
    worst = max(percentile([s * 1000 for s in v], 0.99) for v in loaded.values())
    figure("loaded_p99_within_target", 1.0 if worst < TARGET_P99_MS else 0.0, "bool")
    for status, count in sorted(posted.items()):
        figure(f"webhook_posts_{status}", count, "requests")
    figure("load_average_1m", load_average(), "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options: dict[str, type[Any]] = {"clients": int, "workers": int, "seconds": float}
    defaults = {"clients": 8, "workers": 1, "seconds": 20.0, "interval": 0.1}
    for name, default in defaults.items():
        parser.add_argument(f"--{name}", type=options.get(name, float), default=default)
    parser.add_argument("--quick", action="store_true", help="6 s of load")
    args = parser.parse_args()
    args.seconds = 6.0 if args.quick else args.seconds
    with Stack("railyard-bench-loop-") as stack:
        asyncio.run(run(args, stack))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
