"""Node-type icons in the designer: the palette and the canvas draw each node type's icon,
a Lucide symbol from the sprite for built-in types and the plugin's own sanitised SVG for
the example plugin, under the app's Content-Security-Policy (a violation fails the test).
Screenshots: palette-icons.png, palette-plugin-icons.png."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from e2e.api_client import api_client
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import icon_drawn, new_workflow
from e2e.nodes_by_type import node

pytestmark = pytest.mark.e2e

EXAMPLE_ICON = "/catalog/icons/example/example-logo.svg"


def test_the_palette_and_the_canvas_show_each_node_types_icon(
    page: Any, railyard_server: RailyardServer
) -> None:
    login(page, railyard_server)
    new_workflow(page, railyard_server, "Icons")

    http = page.locator('.palette-item[data-type="http.request"] .palette-icon')
    assert http.locator("use").get_attribute("href") == "/catalog/icons/lucide.svg#globe"
    assert icon_drawn(http)
    schedule = page.locator('.palette-item[data-type="trigger.schedule"] .palette-icon')
    assert schedule.locator("use").get_attribute("href").endswith("#calendar-clock")
    assert icon_drawn(schedule)

    # The example plugin's group is headed by its own SVG icon, served sanitised.
    group = page.locator('.palette-group[data-group="connector:example"] .palette-group-icon')
    assert group.locator("image").get_attribute("href") == EXAMPLE_ICON
    assert icon_drawn(group)
    reverse = page.locator('.palette-item[data-type="example.reverse_text"] .palette-icon')
    assert reverse.locator("use").get_attribute("href").endswith("#repeat")
    assert icon_drawn(reverse)
    page.locator("#palette-list").screenshot(path=str(ARTIFACTS_DIR / "palette-icons.png"))
    example = page.locator('.palette-group[data-group="connector:example"]')
    example.screenshot(path=str(ARTIFACTS_DIR / "palette-plugin-icons.png"))

    # On the canvas too: a node added from the palette carries its icon.
    page.locator('.palette-item[data-type="http.request"]').click()
    assert icon_drawn(node(page, "http.request").locator(".node-icon"))

    # The catalog page shows them too.
    page.goto(f"{railyard_server.base_url}/catalog")
    assert icon_drawn(page.locator("#connector-example h2"))
    assert icon_drawn(page.locator("#connector-http h2"))
    assert icon_drawn(page.locator('[id="node-type-http.request"] td').first)


def test_icons_are_served_as_svg_under_a_closed_policy(railyard_server: RailyardServer) -> None:
    with httpx.Client(base_url=railyard_server.base_url, timeout=15) as anonymous:
        assert anonymous.get(EXAMPLE_ICON).status_code in (302, 303, 307)  # to the login
    api = api_client(railyard_server)
    try:
        for path in (EXAMPLE_ICON, "/catalog/icons/lucide.svg"):
            answer = api.get(path)
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("image/svg+xml")
            csp = answer.headers["content-security-policy"]
            assert "sandbox" in csp and "default-src 'none'" in csp
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert b"<script" not in answer.content
        assert api.get("/catalog/icons/example/nope.svg").status_code == 404
        assert api.get("/catalog/icons/http/globe.svg").status_code == 404
    finally:
        api.close()
