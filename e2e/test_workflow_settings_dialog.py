"""The designer's Settings dialog offers every other workflow as the error workflow: it
reads the workflow list through the API's list envelope (``data``, following ``next``),
never the workflow itself, and shows the one already chosen as selected.

The admin makes three workflows and sets the third as the first's error workflow through
the API, opens the first's designer and the dialog, and finds the other two offered (by
name, after "None"), the third selected, and the first missing.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.api_client import api_client
from e2e.conftest import RailyardServer, login

pytestmark = pytest.mark.e2e


def test_settings_dialog_offers_every_other_workflow(
    page: Any, railyard_server: RailyardServer
) -> None:
    api = api_client(railyard_server)
    names = ["Settings subject", "Settings other", "Settings fallback"]
    ids = [api.create_workflow(n).id for n in names]
    chosen = api.update_workflow(ids[0], settings={"error_workflow_id": ids[2]})
    assert chosen.settings["error_workflow_id"] == ids[2]

    login(page, railyard_server)
    page.goto(f"{railyard_server.base_url}/workflows/{ids[0]}/designer")
    page.click("#settings-btn")
    select = page.locator("#settings-error-workflow")
    select.wait_for()
    options = select.locator("option")
    offered = {
        options.nth(i).get_attribute("value"): options.nth(i).inner_text()
        for i in range(options.count())
    }
    assert offered[""] == "None"
    assert offered[ids[1]] == names[1] and offered[ids[2]] == names[2]
    assert ids[0] not in offered
    assert select.input_value() == ids[2]
