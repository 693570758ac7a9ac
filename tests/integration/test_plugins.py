"""Third-party plugins: the example plugin is discovered and runs; a broken plugin is
reported (catalog API, catalog page, log) and the app still starts."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from backend.app import create_app
from backend.runtime import Runtime
from backend.services.connectors.catalog import load_catalog
from backend.services.connectors.icons import lucide_sprite, sanitize_svg
from backend.settings import Settings, load_settings
from backend.web.security_headers import ICON_CSP
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import running_worker, wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id
from tests.integration.rbac import client_as

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


def _distribution(
    root: Path, dist: str, module: str, source: str, entry: str, version: str = "0.1"
) -> None:
    """A throwaway installed distribution ``dist`` ``version`` in ``root`` (put it on
    ``sys.path``): module ``module`` holding ``source``, and ``entry`` (``name = value``)
    as its one ``railyard.connectors`` entry point."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[railyard.connectors]\n{entry}\n")


def _broken_plugin(root: Path) -> None:
    _distribution(
        root,
        "broken-railyard-plugin",
        "broken_railyard_plugin",
        "raise ImportError('broken plugin: missing dependency frobnicate')\n",
        "broken = broken_railyard_plugin:connector",
    )


EVIL_PLUGIN = """
from typing import Any

import msgspec

from connectors import sdk


class Config(msgspec.Struct):
    url: str = ""


@sdk.action("http.request", label="HTTP Request", config=Config)
async def request(config: Config, input: Any) -> Any:
    return input


connector = sdk.Connector(name="evil", label="Evil", version="1.0", actions=[request])
"""


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


async def test_plugin_setting_from_the_environment_reaches_the_running_action(
    example_plugin: str,
    settings: Settings,
    client: httpx.AsyncClient,
    runtime: Runtime,
    sink: HttpSink,
) -> None:
    """``sdk.setting("example.api_url")`` of an installed plugin reads
    ``RAILYARD_EXAMPLE_API_URL``: the step calls the local server, not the default URL."""
    sink.handler = lambda request, _n: (200, {"id": request.path.rsplit("/", 1)[1]})
    r = await client.post(
        "/api/credentials",
        json={"name": "Example", "type": "example.api_key", "data": {"api_key": "test-key"}},
    )
    assert r.status_code == 201, r.text
    d = diagram(
        [
            node("hook", "trigger.webhook"),
            node("get", "example.get_item", credential=r.json()["id"], item_id="=body.id"),
        ],
        [edge("hook", "get")],
    )
    wf = await publish(client, d)
    configured = load_settings(
        environ={"RAILYARD_EXAMPLE_API_URL": sink.url},
        **{f: getattr(settings, f) for f in settings.__struct_fields__ if f != "extra"},
    )
    async with running_worker(configured):
        run_id = (await client.post(wf["webhook_path"], json={"id": "42"})).json()["run_id"]
        assert await wait_for_run(runtime, run_id) == "succeeded"
    assert steps_by_id(await run_detail(client, run_id))["get"]["output"] == {"id": "42"}
    [call] = sink.requests
    assert (call.path, call.headers["x-api-key"]) == ("/items/42", "test-key")


def test_the_plugin_guide_is_the_example_plugin_and_its_test_runs_as_written(
    example_plugin: str,
) -> None:
    """Every code block of docs/connectors.md's walk-through (sketches eliding code with
    ``...`` aside) is in the example plugin's files, and the guide's test command passes
    there."""
    guide = (Path(__file__).parents[2] / "docs" / "connectors.md").read_text()
    sources = "\n".join(p.read_text() for p in sorted(EXAMPLE.rglob("*.py")))
    blocks = [
        block
        for block in re.findall(r"```python\n(.*?)```", guide, flags=re.DOTALL)
        if "..." not in block
    ]
    assert len(blocks) >= 4
    for block in blocks:
        assert block.strip() in sources, block
    [toml] = re.findall(r"```toml\n(.*?)```", guide, flags=re.DOTALL)
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    documented = tomllib.loads(toml)
    for key, value in documented["project"].items():
        if key != "entry-points":
            assert project["project"][key] == value, key
    assert documented["project"]["entry-points"] == project["project"]["entry-points"]
    command = re.search(r"`(pytest -o asyncio_mode=auto tests)`", guide)
    assert command is not None
    done = subprocess.run(
        [sys.executable, "-m", *command.group(1).split()],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


async def test_a_plugin_declaring_http_request_is_refused_naming_both_packages(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    runtime: Runtime,
    client: httpx.AsyncClient,
) -> None:
    """A distribution ``railyard-evil`` whose connector ``evil`` (an entry-point name that
    sorts before ``http``) declares ``http.request``: refused at load, the message naming
    both distributions; the built-in HTTP Request stays, and only admins read why."""
    _distribution(
        tmp_path,
        "railyard-evil",
        "railyard_evil",
        EVIL_PLUGIN,
        "evil = railyard_evil:connector",
        version="1.0",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    catalog = load_catalog()
    message = (
        "connector evil (railyard-evil 1.0) declares http.request, which belongs to the "
        f"built-in connector http (railyard {version('railyard')})"
    )
    assert catalog.errors == [message]
    assert catalog.get("http.request").connector == "http"  # type: ignore[union-attr]
    assert catalog.action("http.request").fn.__module__ == "connectors.builtin.http"
    assert "evil" not in {c.name for c in catalog.connectors}

    runtime.catalog = catalog
    api = (await client.get("/api/catalog")).json()
    assert (api["errors"], api["error_count"]) == ([message], 1)
    for page in ("/catalog", "/admin/dashboard"):
        text = (await client.get(page)).text
        assert "railyard-evil 1.0" in text and "declares http.request" in text, page

    async with client_as(settings, runtime, "viewer@example.com", "viewer") as viewer:
        api = (await viewer.get("/api/catalog")).json()
        assert (api["errors"], api["error_count"]) == ([], 1)
        page = (await viewer.get("/catalog")).text
        assert "1 connector failed to load; an administrator can see why" in page
        assert "railyard-evil" not in page and "declares" not in page


async def test_plugin_icons_are_served_as_sanitised_under_a_closed_policy(
    example_plugin: str, client: httpx.AsyncClient
) -> None:
    """The example plugin's icon is served as the sanitiser wrote it (not the file as
    shipped), as ``image/svg+xml`` under the icon policy; the node types name it."""
    shipped = (EXAMPLE / "railyard_example_plugin" / "icons" / "example.svg").read_bytes()
    answer = await client.get("/catalog/icons/example/example-logo.svg")
    assert answer.status_code == 200
    assert answer.content == sanitize_svg(shipped) != shipped
    assert answer.headers["content-type"] == "image/svg+xml"
    assert answer.headers["content-security-policy"] == ICON_CSP
    assert answer.headers["x-content-type-options"] == "nosniff"
    catalog = (await client.get("/api/catalog")).json()
    example = next(c for c in catalog["connectors"] if c["name"] == "example")
    assert example["icon"] == "example/example-logo"
    for missing in ("example/example-logo", "example/other.svg", "http/globe.svg"):
        assert (await client.get(f"/catalog/icons/{missing}")).status_code == 404
    sprite = await client.get("/catalog/icons/lucide.svg")
    assert sprite.content == lucide_sprite() and b'<symbol id="globe"' in sprite.content
