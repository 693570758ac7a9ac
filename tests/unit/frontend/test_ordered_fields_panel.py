"""The Set's Fields (an ordered field list) in the config panel: rows in the stored order,
from the list form and from the older object form, read back as a list (data-ordered)."""

from __future__ import annotations

import re

from backend.engine.nodes.control_set import SPEC
from frontend.forms import create_environment, render_config_panel


def _rows(mapping: object) -> tuple[str, list[tuple[str, str]]]:
    out = render_config_panel(create_environment(), SPEC, "set_1", "", {"mapping": mapping}, [])
    tag = re.search(r'<div class="kv-editor"[^>]*data-field="mapping"[^>]*>', out)
    assert tag, out
    keys = re.findall(r'class="kv-key" placeholder="key" value="([^"]*)"', out)
    values = re.findall(r'class="kv-value[^"]*" placeholder="value" value="([^"]*)"', out)
    return tag.group(0), list(zip(keys, values, strict=True))


def test_list_form_rows_in_order_read_back_as_a_list() -> None:
    tag, rows = _rows([{"name": "zeta", "value": "=qty"}, {"name": "a", "value": 5}])
    assert "data-ordered" in tag
    assert rows == [("zeta", "=qty"), ("a", "5")]


def test_object_form_is_shown_as_it_is() -> None:
    tag, rows = _rows({"zeta": "=qty", "a": "x"})
    assert "data-ordered" in tag
    assert rows == [("zeta", "=qty"), ("a", "x")]
