"""The API documentation at /schema renders offline, from vendored assets, under the CSP."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer

pytestmark = pytest.mark.e2e


def test_api_docs_render_offline_under_the_csp(railyard_server: RailyardServer, page: Any) -> None:
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{railyard_server.base_url}/schema")
    page.locator(".swagger-ui .info .title").wait_for()
    assert "Railyard" in page.locator(".swagger-ui .info .title").inner_text()
    page.locator(".swagger-ui .opblock").first.wait_for()
    page.locator("button.authorize").wait_for()  # the security schemes give an Authorize button
    page.screenshot(path=str(ARTIFACTS_DIR / "api-docs.png"))
    foreign = [u for u in requested if not u.startswith(railyard_server.base_url)]
    assert foreign == [], foreign
