"""The designer on a large diagram: 500 nodes, 600 edges.

Builds a connected, acyclic diagram (a Webhook trigger, Set nodes fanning out as a random
tree, and Join nodes where the extra 101 edges meet: every node reachable, no errors), then
measures:

- ``compile_*``: the server's compile (designer_schema.compile_diagram with the app's
  catalog and JSONata checker), in process: the first (cold) run, then median and max of
  ``--repeat`` more runs (ms), and
  the ``POST /api/v1/workflows/{id}/compile`` round trip (median, ms);
- ``page_load``: the designer page in headless Chromium, from navigation until every node
  is drawn (ms, median of 3 loads);
- ``drag_frame_*``: frame times (requestAnimationFrame deltas, ms) while a node is dragged
  for ``--drag-seconds`` (2 s): pressed with the mouse, then one mouse move per frame;
  Chromium runs without its 60 Hz frame cap, so a frame lasts as long as its work;
- ``layout_*``: the auto-layout: computing it (ms) and the frame times of its animation.

The app runs as ``railyard dev`` on embedded PostgreSQL and Redis in a temporary directory
(the same way the e2e tests start it); the browser is Debian's Chromium. Prints
``figure: <name> = <value> <unit>`` lines. Targets: median frame under 16 ms, compile
under 50 ms.
"""

from __future__ import annotations

import argparse
import importlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
from railyard_client import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend.services.connectors.catalog import load_catalog  # noqa: E402
from backend.services.workflows.workflows import compile_for  # noqa: E402
from bench.common import figure  # noqa: E402
from designer_schema.diagram import Diagram  # noqa: E402

# The e2e fixtures' helpers (start, wait for, stop ``railyard dev``; Chromium's path and
# flags), loaded at run time: the bench is type-checked, the test fixtures are not.
E2E = importlib.import_module("e2e.conftest")
ADMIN_EMAIL: str = E2E.ADMIN_EMAIL
ADMIN_PASSWORD: str = E2E.ADMIN_PASSWORD
CHROMIUM: str = E2E.CHROMIUM
CHROMIUM_ARGS: list[str] = E2E.CHROMIUM_ARGS

NODES = 500
EDGES = 600


def big_diagram(seed: int = 7) -> dict[str, Any]:
    """NODES nodes and EDGES edges, acyclic and connected, laid out on a loose grid."""
    rng = random.Random(seed)
    extra = EDGES - (NODES - 1)
    joins = set(rng.sample(range(NODES // 2, NODES), extra))
    nodes = [{"id": "hook", "type": "trigger.webhook", "position": {"x": 0, "y": 0}}]
    ids = ["hook"]
    for i in range(1, NODES):
        if i in joins:
            node = {"id": f"join_{i}", "type": "control.join", "config": {"mode": "all"}}
        else:
            node = {
                "id": f"set_{i}",
                "type": "control.set",
                "config": {"mapping": {"n": i, "total": f"=$number($trigger.body.n) + {i}"}},
            }
        node["position"] = {"x": (i % 25) * 260, "y": (i // 25) * 120}
        nodes.append(node)
        ids.append(str(node["id"]))
    edges = []
    for i in range(1, NODES):
        source = ids[rng.randrange(0, i)]
        edges.append({"id": f"t{i}", "source": source, "target": ids[i]})
    for n, i in enumerate(sorted(joins)):
        # A second way into each join, from an earlier node (keeps the graph acyclic).
        options = [j for j in range(i) if ids[j] != edges[i - 1]["source"]]
        source = ids[rng.choice(options)]
        edges.append({"id": f"x{n}", "source": source, "target": ids[i]})
    return {"nodes": nodes, "edges": edges}


def bench_compile(diagram: dict[str, Any], repeat: int) -> None:
    catalog = load_catalog()
    typed = msgspec.convert(diagram, Diagram)
    times = []
    for _ in range(repeat + 1):
        t = time.perf_counter()
        graph, diagnostics = compile_for(typed, catalog)
        times.append((time.perf_counter() - t) * 1000)
    errors = [d for d in diagnostics if d.severity == "error"]
    if graph is None:
        raise SystemExit(f"the bench diagram does not compile: {errors[:3]}")
    # The first compile of a process also warms the expression checker up.
    figure("compile_first", times[0], "ms")
    figure("compile_median", statistics.median(times[1:]), "ms")
    figure("compile_max", max(times[1:]), "ms")


def start_server(data_dir: Path, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = E2E.free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "RAILYARD_ADMIN_EMAIL": ADMIN_EMAIL,
        "RAILYARD_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("RAILYARD_BASE_URL", None)
    exe = Path(sys.executable).parent / "railyard"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(exe), "dev", "--port", str(port), "--data-dir", str(data_dir)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    E2E._wait_ready(proc, base_url, log_path)
    return proc, base_url


def api_client(base_url: str) -> Client:
    """A railyard-client signed in as the admin."""
    c = Client(base_url, timeout=60)
    c.login(ADMIN_EMAIL, ADMIN_PASSWORD)
    return c


def frames(values: list[float], name: str) -> None:
    if not values:
        raise SystemExit(f"no frames recorded for {name}")
    ordered = sorted(values)
    figure(f"{name}_frame_median", statistics.median(values), "ms")
    figure(f"{name}_frame_p95", ordered[int(0.95 * (len(ordered) - 1))], "ms")
    figure(f"{name}_frames", len(values), "frames")


def bench_browser(base_url: str, workflow_id: str, drag_seconds: float) -> None:
    from playwright.sync_api import sync_playwright

    url = f"{base_url}/workflows/{workflow_id}/designer"
    with sync_playwright() as pw:
        # Without the 60 Hz cap a frame lasts as long as its work: the deltas measure it.
        args = [*CHROMIUM_ARGS, "--disable-frame-rate-limit", "--disable-gpu-vsync"]
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(f"{base_url}/login")
        page.fill("#email", ADMIN_EMAIL)
        page.fill("#password", ADMIN_PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base_url}/workflows**")

        loads = []
        for _ in range(3):
            t = time.perf_counter()
            page.goto(url)
            # Until the canvas is drawn (only nodes near the view are in the DOM).
            page.wait_for_function(
                "() => window.railyardDesigner && document.querySelector('#canvas g.node')"
            )
            loads.append((time.perf_counter() - t) * 1000)
        figure("page_load_median", statistics.median(loads), "ms")

        # Zoom to 100 % on the trigger so a node is large enough to grab.
        page.evaluate(
            """() => { const { model, canvas } = window.railyardDesigner;
                       model.setViewport({ zoom: 1 }); canvas.centerOn('set_1'); }"""
        )
        box = page.locator('#canvas g.node[data-node-id="set_1"] rect.node-body').bounding_box()
        assert box
        x, y = box["x"] + 110, box["y"] + 5
        page.mouse.move(x, y)
        page.mouse.down()
        # One mouse move per frame for drag_seconds, dispatched in the page so that every
        # frame carries a move; a frame's time is the move's handling plus its rendering.
        deltas = page.evaluate(
            """([x, y, ms]) => new Promise((done) => {
                 const out = [];
                 const start = performance.now();
                 let last = start, i = 0;
                 const tick = (now) => {
                   if (i) out.push(now - last);
                   last = now;
                   if (now - start > ms) return done(out);
                   i++;
                   window.dispatchEvent(new MouseEvent("mousemove", {
                     clientX: x + 150 * ((i % 60) / 60), clientY: y + 60 * ((i % 40) / 40),
                     bubbles: true }));
                   requestAnimationFrame(tick);
                 };
                 requestAnimationFrame(tick);
               })""",
            [x, y, drag_seconds * 1000],
        )
        page.mouse.up()
        frames(deltas, "drag")

        page.evaluate("() => window.railyardDesigner.canvas.fit()")
        result = page.evaluate(
            """() => new Promise((done) => {
                 const frames = [];
                 let last = performance.now(), running = true;
                 const tick = (now) => {
                   frames.push(now - last);
                   last = now;
                   if (running) requestAnimationFrame(tick);
                 };
                 requestAnimationFrame(tick);
                 const started = performance.now();
                 const finished = window.railyardDesigner.editor.autoLayout();
                 const compute = performance.now() - started;
                 finished.then(() => requestAnimationFrame(() => {
                   running = false;
                   done({ compute, frames: frames.slice(1) });
                 }));
               })"""
        )
        figure("layout_compute", result["compute"], "ms")
        frames(result["frames"], "layout")
        figure("layout_frame_max", max(result["frames"]), "ms")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="compile repetitions")
    parser.add_argument("--drag-seconds", type=float, default=2.0)
    args = parser.parse_args()

    diagram = big_diagram()
    assert len(diagram["nodes"]) == NODES and len(diagram["edges"]) == EDGES
    figure("nodes", NODES, "nodes")
    figure("edges", EDGES, "edges")
    bench_compile(diagram, args.repeat)

    data_dir = Path(tempfile.mkdtemp(prefix="railyard-bench-designer-", dir="/tmp"))
    data_dir.chmod(0o755)
    log_path = data_dir / "server.log"
    proc, base_url = start_server(data_dir, log_path)
    try:
        c = api_client(base_url)
        try:
            wf = c.create_workflow("Bench 500").id
            saved = c.save_draft(wf, diagram)
            assert saved.ok, saved.diagnostics[:3]
            rtt = []
            for _ in range(5):
                t = time.perf_counter()
                compiled = c.post(f"/api/v1/workflows/{wf}/compile", json={"diagram": diagram})
                compiled.raise_for_status()
                rtt.append((time.perf_counter() - t) * 1000)
            figure("compile_http_median", statistics.median(rtt), "ms")
        finally:
            c.close()
        bench_browser(base_url, wf, args.drag_seconds)
    finally:
        E2E._stop(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
