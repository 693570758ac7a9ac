"""A connector written by ``railyard connector new``, installed beside Railyard (its
distribution metadata built by setuptools onto the ``PYTHONPATH`` of a ``railyard dev``),
appears in the palette with its own icon, and its polling trigger and action run in a
published workflow against the local API its own tests use. Screenshot:
generated-connector.png."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from e2e.api_client import api_client, node, publish
from e2e.conftest import ARTIFACTS_DIR, login, railyard_dev
from e2e.designer_page import icon_drawn, new_workflow
from tests.generated_connector import build_metadata, generate, python_path

pytestmark = pytest.mark.e2e


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Any]]:
    """The generated package, its site folder, and its tests' local API, serving."""
    package = generate(tmp_path)
    site = tmp_path / "site"
    build_metadata(package, site)
    spec = importlib.util.spec_from_file_location("acme_local_api", package / "tests/conftest.py")
    assert spec is not None and spec.loader is not None
    local = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, local)  # its dataclasses look themselves up
    spec.loader.exec_module(local)
    api = local.FakeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), local.handler(api))
    api.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield package, site, api
    finally:
        server.shutdown()
        server.server_close()


def test_a_generated_connector_is_in_the_palette_and_runs(
    page: Any, acme: tuple[Path, Path, Any]
) -> None:
    package, site, api = acme
    api.add("First order")  # there before the workflow: taken with "include existing items"
    env = {"PYTHONPATH": python_path(package, site), "RAILYARD_ACME_API_URL": api.url}
    with railyard_dev("acme", env=env) as server:
        login(page, server)
        new_workflow(page, server, "Acme in the palette")
        group = page.locator('.palette-group[data-group="connector:acme"]')
        icon = group.locator(".palette-group-icon")
        assert icon.locator("image").get_attribute("href") == "/catalog/icons/acme/acme.svg"
        assert icon_drawn(icon)
        for node_type in ("acme.new_item", "acme.create_item"):
            item = group.locator(f'.palette-item[data-type="{node_type}"]')
            assert icon_drawn(item.locator(".palette-icon"))
        group.screenshot(path=str(ARTIFACTS_DIR / "generated-connector.png"))

        client = api_client(server)
        try:
            credential = client.create_credential(
                "Acme", "acme.api_key", {"api_key": "test-key"}
            ).id
            publish(
                client,
                "Copy new Acme items",
                node("new", "acme.new_item", 0, credential=credential, include_existing=True),
                node(
                    "copy",
                    "acme.create_item",
                    200,
                    credential=credential,
                    name='=$trigger.name & " (copy)"',
                ),
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(api.items) < 2:
                time.sleep(0.2)
            assert [item["name"] for item in api.items] == ["First order", "First order (copy)"], (
                server.log_tail()
            )
        finally:
            client.close()
