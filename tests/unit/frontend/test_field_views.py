"""Field editors chosen by schema type: chips, durations, workflow pickers, the retry group."""

from __future__ import annotations

import re

import pytest
from jinja2.sandbox import SandboxedEnvironment

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagnostics import Diagnostic
from frontend.field_views import field_view, format_duration
from frontend.forms import create_environment, render_config_panel, settings_views

SPEC = NodeTypeSpec(
    type="test.fields",
    label="Fields",
    kind="action",
    config_schema={
        "type": "object",
        "properties": {
            "to": {"type": "array", "items": {"type": "string", "format": "email"}},
            "ports": {"type": "array", "items": {"type": "integer"}},
            "wait": {"type": "number", "x-duration": True, "minimum": 0},
            "target": {"type": "string", "x-workflow-picker": True},
        },
        "required": ["to"],
    },
    expression_fields=("to",),
)


@pytest.fixture(scope="module")
def env() -> SandboxedEnvironment:
    return create_environment()


def tag(out: str, attr: str, name: str) -> str:
    match = re.search(rf'<(input|select|textarea|div)\b[^>]*{attr}="{re.escape(name)}"[^>]*>', out)
    assert match, f"no control for {name}"
    return match.group(0)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(30, "30s"), (90, "1m 30s"), (5400, "1h 30m"), (0.25, "0.25s"), (86400, "1d"), (0, "0s")],
)
def test_durations_are_shown_with_units(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_a_list_of_addresses_is_chips_that_check_addresses(env: SandboxedEnvironment) -> None:
    out = render_config_panel(env, SPEC, "n1", "", {"to": ["ada@example.com", "bob@x.org"]}, [])
    editor = tag(out, "data-field", "to")
    assert 'data-kind="chips"' in editor and 'data-item-format="email"' in editor
    assert out.count('class="value-chip"') == 2
    assert 'data-value="ada@example.com"' in out
    assert 'aria-label="Remove bob@x.org"' in out  # each chip's remove button is labelled
    assert 'id="cfg-1" class="chip-input"' in out  # the label's `for` reaches the box


def test_a_plain_address_stored_by_an_api_client_shows_as_one_chip() -> None:
    prop = SPEC.config_schema["properties"]["to"]
    view = field_view("to", prop, "ada@example.com", required=True, expression=False)
    assert view.kind == "chips" and view.chips == ["ada@example.com"]


def test_number_lists_are_chips_read_back_as_numbers() -> None:
    view = field_view(
        "ports",
        SPEC.config_schema["properties"]["ports"],
        [80, 443],
        required=False,
        expression=False,
    )
    assert (view.kind, view.value_kind, view.chips) == ("chips", "integer", ["80", "443"])


def test_an_expression_list_opens_in_expression_mode(env: SandboxedEnvironment) -> None:
    out = render_config_panel(env, SPEC, "n1", "", {"to": "=body.recipients"}, [])
    assert 'data-field-off="to" data-kind="chips"' in out
    assert re.search(r'<textarea class="expr-input[^>]*data-field="to"', out)


def test_a_duration_field_shows_its_value_with_units(env: SandboxedEnvironment) -> None:
    out = render_config_panel(env, SPEC, "n1", "", {"wait": 300}, [])
    control = tag(out, "data-field", "wait")
    assert 'data-kind="duration"' in control and 'value="5m"' in control
    assert 'data-min="0"' in control


def test_a_workflow_picker_shows_the_chosen_workflows_name(env: SandboxedEnvironment) -> None:
    wid = "0b0e6f4c-1111-4222-8333-444455556666"
    out = render_config_panel(
        env, SPEC, "n1", "", {"target": wid}, [], workflow_names={wid: "Invoice <copy>"}
    )
    picker = tag(out, "data-field", "target")
    assert 'data-kind="workflow"' in picker and f'data-value="{wid}"' in picker
    assert 'value="Invoice &lt;copy&gt;"' in out
    assert f'href="/workflows/{wid}/designer"' in out


def test_an_unreadable_workflow_is_shown_by_id_only(env: SandboxedEnvironment) -> None:
    wid = "0b0e6f4c-1111-4222-8333-444455556666"
    out = render_config_panel(env, SPEC, "n1", "", {"target": wid}, [])
    assert "not one you may read" in out
    assert "/designer" not in out.split('data-field="target"', 1)[1].split("</div>", 3)[0]


def test_actions_get_a_retry_group_and_a_timeout(env: SandboxedEnvironment) -> None:
    config = {
        "retry": {
            "max_attempts": 4,
            "initial_interval": 2,
            "non_retryable_error_kinds": ["http_404"],
        },
        "timeout": 90,
    }
    out = render_config_panel(env, SPEC, "n1", "", config, [])
    assert 'data-field="retry" data-kind="group"' in out
    assert 'value="4"' in tag(out, "data-subfield", "max_attempts")
    assert 'value="2s"' in tag(out, "data-subfield", "initial_interval")
    assert 'placeholder="1m 40s"' in tag(out, "data-subfield", "max_interval")  # the default
    assert 'data-value="http_404"' in out
    assert '<option value="http_429">' in out  # known kinds are suggested
    assert 'value="1m 30s"' in tag(out, "data-field", "timeout")


def test_flow_steps_get_a_timeout_but_no_retry() -> None:
    spec = NodeTypeSpec(type="control.x", label="X", kind="control")
    names = [v.name for v in settings_views(spec, {})]
    assert names == ["timeout"]
    trigger = NodeTypeSpec(type="trigger.x", label="T", kind="trigger")
    assert settings_views(trigger, {}) == []


def test_diagnostics_on_a_retry_setting_land_on_that_setting(env: SandboxedEnvironment) -> None:
    diag = Diagnostic(
        "error", "invalid_config", "must be at least 1", "n1", None, "retry.max_attempts"
    )
    out = render_config_panel(env, SPEC, "n1", "", {"retry": {"max_attempts": 0}}, [diag])
    wrap = out.split('data-field-wrap="retry.max_attempts"', 1)[1].split("</div>\n", 3)
    assert "must be at least 1" in "".join(wrap)
    assert 'class="field field-integer has-error"' in out
