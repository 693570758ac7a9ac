"""Third-party plugins: the example plugin is discovered and runs; a broken plugin is
reported (catalog API, catalog page, log) and the app still starts."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from backend.app import create_app
from backend.runtime import Runtime
from backend.services.catalog import load_catalog
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.test_runs import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).parents[2] / "connectors" / "examples" / "railyard-example-plugin"


@pytest.fixture(scope="session")
def example_plugin() -> str:
    """Make sure the example plugin is installed (``make test`` does it; else pip here)."""
    try:
        return version("railyard-example-plugin")
    except PackageNotFoundError:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(EXAMPLE)],
            check=True,
        )
        return version("railyard-example-plugin")


async def test_example_plugin_is_discovered_and_runs(
    example_plugin: str, client: httpx.AsyncClient, runtime: Runtime, worker: Any
) -> None:
    catalog = (await client.get("/api/catalog")).json()
    example = next(c for c in catalog["connectors"] if c["name"] == "example")
    assert example["source"] == f"railyard-example-plugin {example_plugin}"
    assert "example.reverse_text" in {n["type"] for n in catalog["node_types"]}
    page = await client.get("/catalog")
    assert "example.reverse_text" in page.text and "railyard-example-plugin" in page.text

    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("rev", "example.reverse_text", text="=$trigger.body.word"),
        ],
        [edge("hook", "rev")],
    )
    wf = await publish(client, d)
    run_id = (await client.post(wf["webhook_path"], json={"word": "railyard"})).json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "succeeded"
    out = steps_by_id(await run_detail(client, run_id))["rev"]["output"]
    assert out == {"text": "drayliar", "length": 8}


def _broken_plugin(root: Path) -> None:
    (root / "broken_railyard_plugin.py").write_text(
        "raise ImportError('broken plugin: missing dependency frobnicate')\n"
    )
    info = root / "broken_railyard_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-railyard-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        "[railyard.connectors]\nbroken = broken_railyard_plugin:connector\n"
    )


async def test_broken_plugin_is_reported_and_the_app_still_starts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    runtime: Runtime,
    client: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _broken_plugin(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    catalog = load_catalog()
    [error] = catalog.errors
    assert "broken" in error and "missing dependency frobnicate" in error
    assert "http.request" in catalog.specs  # everything else still loads
    assert any("failed to load" in r.getMessage() for r in caplog.records)

    runtime.catalog = catalog
    api = (await client.get("/api/catalog")).json()
    assert api["errors"] == [error]
    page = await client.get("/catalog")
    assert page.status_code == 200
    assert "Plugins that failed to load" in page.text and "frobnicate" in page.text

    # A whole app (its own runtime, built at startup) starts and serves despite the plugin.
    async with AsyncTestClient(app=create_app(settings)) as test_client:
        health = await test_client.get("/health/ready")
        assert health.status_code == 200
        assert test_client.app.state.runtime.catalog.errors == [error]
