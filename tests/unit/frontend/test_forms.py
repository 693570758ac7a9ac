"""The node config panel rendered from a node type's config schema."""

from __future__ import annotations

import re

import pytest
from jinja2.sandbox import SandboxedEnvironment

from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagnostics import Diagnostic
from frontend.forms import CredentialChoice, create_environment, render_config_panel

SPEC = NodeTypeSpec(
    type="test.everything",
    label="Everything",
    kind="action",
    description="A node type with one field of each kind.",
    config_schema={
        "type": "object",
        "properties": {
            "url": {"type": "string", "title": "URL", "description": "Where to send it"},
            "body": {"type": "string", "format": "textarea"},
            "amount": {"type": "number", "minimum": 0},
            "count": {"type": "integer", "default": 3},
            "enabled": {"type": "boolean"},
            "method": {"type": "string", "enum": ["GET", "POST"]},
            "level": {"enum": [1, 2, 3]},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "mapping": {"type": "object", "additionalProperties": True},
            "payload": {},
            "tags": {"type": "array", "items": {"type": "string"}},
            "timeout": {"type": "number"},
        },
        "required": ["url", "method"],
    },
    expression_fields=("body", "mapping", "payload"),
)


@pytest.fixture(scope="module")
def env() -> SandboxedEnvironment:
    return create_environment()


def render(env: SandboxedEnvironment, config: dict, diagnostics=(), label: str = "") -> str:
    return render_config_panel(env, SPEC, "everything_1", label, config, list(diagnostics))


def control(out: str, name: str) -> str:
    """The opening tag of the control whose data-field is ``name``."""
    match = re.search(
        rf'<(input|select|textarea|div)\b[^>]*data-field="{re.escape(name)}"[^>]*>', out
    )
    assert match, f"no control for {name}"
    return match.group(0)


def test_environment_is_sandboxed_and_autoescapes(env: SandboxedEnvironment) -> None:
    assert isinstance(env, SandboxedEnvironment)
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"


@pytest.mark.parametrize(
    ("name", "kind", "tag"),
    [
        ("url", "string", "input"),
        ("body", "string", "textarea"),
        ("amount", "number", "input"),
        ("count", "integer", "input"),
        ("enabled", "boolean", "input"),
        ("method", "enum", "select"),
        ("level", "enum", "select"),
        ("headers", "kv", "div"),
        ("mapping", "kv", "div"),
        ("payload", "json", "textarea"),
        ("tags", "chips", "div"),
        ("__label", "string", "input"),
        ("on_error", "enum", "select"),
        ("timeout", "duration", "input"),
    ],
)
def test_each_field_kind_gets_its_control(
    env: SandboxedEnvironment, name: str, kind: str, tag: str
) -> None:
    tag_html = control(render(env, {}), name)
    assert tag_html.startswith(f"<{tag}")
    assert f'data-kind="{kind}"' in tag_html


def test_control_details(env: SandboxedEnvironment) -> None:
    out = render(env, {"amount": 2.5, "enabled": True, "method": "POST", "level": 2})
    assert 'type="number"' in control(out, "amount")
    assert 'min="0"' in control(out, "amount")
    assert 'value="2.5"' in control(out, "amount")
    assert 'step="1"' in control(out, "count")
    assert 'placeholder="3"' in control(out, "count")
    assert 'type="checkbox"' in control(out, "enabled")
    assert "checked" in control(out, "enabled")
    assert '<option value="POST" selected>' in out
    # Non-string enums are JSON-encoded and flagged so the browser decodes them.
    assert "data-json" in control(out, "level")
    assert '<option value="2" selected>' in out
    assert 'data-value-kind="string"' in control(out, "headers")
    assert 'data-value-kind="auto"' in control(out, "mapping")
    # "timeout" is a reserved setting: shown once, in the Settings section.
    assert out.count('data-field="timeout"') == 1


def test_titles_descriptions_and_required_marks(env: SandboxedEnvironment) -> None:
    out = render(env, {})
    assert "URL" in out
    assert "Where to send it" in out
    assert "Amount" in out  # humanized name when there is no title
    assert out.count('class="required"') == 2
    assert "A node type with one field of each kind." in out


def test_values_are_shown(env: SandboxedEnvironment) -> None:
    out = render(
        env,
        {
            "url": "https://example.test/x",
            "headers": {"Accept": "application/json"},
            "mapping": {"total": "=body.amount * 2", "n": 5},
            "payload": {"a": [1, 2]},
            "on_error": "error_port",
            "timeout": 30,
        },
        label="Call the API",
    )
    assert 'value="https://example.test/x"' in out
    assert 'value="Call the API"' in control(out, "__label")
    assert 'value="Accept"' in out and 'value="application/json"' in out
    assert 'value="=body.amount * 2"' in out
    assert 'value="5"' in out
    assert "&#34;a&#34;: [" in out  # pretty-printed JSON, escaped
    assert '<option value="error_port" selected>' in out
    assert 'value="30s"' in control(out, "timeout")


def test_expression_fields_get_a_hint_and_marker(env: SandboxedEnvironment) -> None:
    out = render(env, {"body": "=payload.text"})
    assert "data-expression" in control(out, "body")
    assert "is-expression" in control(out, "body")
    assert "data-expression" not in control(out, "url")
    assert out.count("expression-hint") == 3
    assert "=body.amount * 2" in out


def test_xss_in_config_values_and_label_is_escaped(env: SandboxedEnvironment) -> None:
    evil = '"><script>alert(1)</script>'
    out = render(
        env,
        {
            "url": evil,
            "body": "</textarea><script>alert(2)</script>",
            "headers": {evil: evil},
            "payload": {"x": "</textarea><img src=x onerror=alert(3)>"},
            "method": evil,
        },
        diagnostics=[
            Diagnostic("error", "bad", "<img src=x onerror=alert(4)>", node_id="everything_1")
        ],
        label=evil,
    )
    assert "<script>" not in out
    assert "<img" not in out
    assert "&lt;script&gt;" in out
    assert 'value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in control(out, "url")
    assert 'value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in control(out, "__label")


def test_diagnostics_shown_next_to_fields_and_at_the_top(env: SandboxedEnvironment) -> None:
    diagnostics = [
        Diagnostic(
            "error", "missing_config", "URL is required", node_id="everything_1", field="url"
        ),
        Diagnostic(
            "error",
            "expression_syntax",
            "Bad expression",
            node_id="everything_1",
            field="mapping.total",
        ),
        Diagnostic("error", "unreachable_node", "Nothing leads here", node_id="everything_1"),
        Diagnostic("error", "missing_config", "Other node", node_id="other_1", field="url"),
    ]
    out = render(env, {}, diagnostics)
    url_wrap = out[out.index('data-field-wrap="url"') : out.index('data-field-wrap="body"')]
    assert '<p class="field-error" role="alert">URL is required</p>' in url_wrap
    mapping_wrap = out[
        out.index('data-field-wrap="mapping"') : out.index('data-field-wrap="payload"')
    ]
    assert "Bad expression" in mapping_wrap
    top = out[out.index('class="node-errors"') : out.index('data-field-wrap="__label"')]
    assert "Nothing leads here" in top
    assert "Other node" not in out


def test_trigger_nodes_have_no_error_settings(env: SandboxedEnvironment) -> None:
    spec = NodeTypeSpec(type="trigger.manual", label="Manual", kind="trigger", inputs=())
    out = render_config_panel(env, spec, "manual_1", "", {}, [])
    assert 'data-field="__label"' in out
    assert 'data-field="on_error"' not in out
    assert "Parameters" not in out


def test_expression_in_a_number_field_stays_editable(env: SandboxedEnvironment) -> None:
    spec = NodeTypeSpec(
        type="control.wait",
        label="Wait",
        kind="control",
        config_schema={"type": "object", "properties": {"seconds": {"type": "integer"}}},
        expression_fields=("seconds",),
    )
    out = render_config_panel(env, spec, "wait_1", "", {"seconds": "=body.delay"}, [])
    tag = control(out, "seconds")
    assert 'type="text"' in tag
    assert 'data-kind="expression"' in tag
    assert 'value="=body.delay"' in tag
    # The literal number input waits behind the fx toggle, out of the model.
    assert re.search(r'<input type="number"[^>]*data-field-off="seconds"', out)
    assert 'aria-pressed="true"' in out


def test_every_expression_field_has_an_fx_toggle_and_a_parked_expression_input(
    env: SandboxedEnvironment,
) -> None:
    out = render(env, {})
    toggles = re.findall(r'data-fx-for="([^"]+)"', out)
    assert toggles == ["body", "mapping", "payload"]
    assert 'aria-pressed="true"' not in out
    for name in toggles:
        # literal widget live, expression input parked (data-field-off) in a hidden wrapper
        assert 'data-kind="expression"' not in control(out, name)
        assert re.search(rf'data-field-off="{name}"\s+data-kind="expression"', out)
    assert out.count('<div class="expression-control" hidden>') == 3


@pytest.mark.parametrize(
    ("name", "prop", "literal_tag"),
    [
        ("method", {"type": "string", "enum": ["GET", "POST"]}, "select"),
        ("enabled", {"type": "boolean"}, "input"),
        ("payload", {}, "textarea"),
    ],
)
def test_an_expression_value_opens_in_expression_mode(
    env: SandboxedEnvironment, name: str, prop: dict, literal_tag: str
) -> None:
    spec = NodeTypeSpec(
        type="t.x",
        label="X",
        kind="action",
        config_schema={"type": "object", "properties": {name: prop}},
        expression_fields=(name,),
    )
    out = render_config_panel(env, spec, "x_1", "", {name: "=body.v"}, [])
    live = control(out, name)
    assert 'data-kind="expression"' in live and "=body.v" in out
    assert re.search(rf'<{literal_tag}\b[^>]*data-field-off="{name}"', out)
    assert "expr-mode" in out and "fx-toggle active" in out


CRED_SPEC = NodeTypeSpec(
    type="email.send",
    label="Send email",
    kind="action",
    config_schema={
        "type": "object",
        "properties": {
            "credential": {"type": "string", "title": "SMTP server", "x-credential-type": "smtp"},
            "alt": {"type": "string", "x-credential-type": ["slack.bot_token", "slack.oauth2"]},
        },
        "required": ["credential"],
    },
)
CHOICES = [
    CredentialChoice("c1", "Office relay", "smtp", "password ••••"),
    CredentialChoice("c2", "Bot", "slack.bot_token", "token ••••abcd"),
    CredentialChoice("c3", "Other SMTP", "smtp"),
]


def test_credential_fields_are_pickers_of_saved_credentials_of_their_types(
    env: SandboxedEnvironment,
) -> None:
    out = render_config_panel(
        env,
        CRED_SPEC,
        "email_1",
        "",
        {"credential": "c3"},
        [],
        credentials=CHOICES,
        credential_type_labels={"smtp": "SMTP server", "slack.bot_token": "Slack bot token"},
        return_to="/workflows/w1/designer",
    )
    tag = control(out, "credential")
    assert tag.startswith("<select") and 'data-kind="credential"' in tag
    assert 'data-credential-types="smtp"' in tag
    picker = out[out.index(tag) : out.index("</select>", out.index(tag))]
    assert '<option value="c1">Office relay · password ••••</option>' in picker
    assert '<option value="c3" selected>Other SMTP</option>' in picker
    assert "c2" not in picker  # another type
    assert (
        'href="/credentials?type=smtp&amp;next=%2Fworkflows%2Fw1%2Fdesigner%3Fnode%3Demail_1'
        '%26field%3Dcredential"' in out
    )
    assert "+ New SMTP server" in out
    # A list of types: both types are offered, each with its own "New" link.
    alt = out[out.index(control(out, "alt")) :]
    assert '<option value="c2">Bot · token ••••abcd</option>' in alt
    assert "+ New Slack bot token" in alt and "+ New slack.oauth2" in alt


def test_a_missing_credential_stays_selected_and_visible(env: SandboxedEnvironment) -> None:
    out = render_config_panel(env, CRED_SPEC, "email_1", "", {"credential": "gone"}, [])
    assert '<option value="gone" selected>Missing credential (gone)</option>' in out
    assert "No saved credential of this type yet." not in out.split('data-field="alt"')[0]
    # Without a return path the link still opens the right form.
    assert 'href="/credentials?type=smtp"' in out


def test_new_credential_link_never_returns_off_site(env: SandboxedEnvironment) -> None:
    out = render_config_panel(env, CRED_SPEC, "e", "", {}, [], return_to="//evil.test/x")
    assert "next=" not in out


def _enum_spec(prop: dict) -> NodeTypeSpec:
    return NodeTypeSpec(
        type="t.enum",
        label="Enum",
        kind="action",
        config_schema={"type": "object", "properties": {"mode": prop}},
    )


def _options(out: str) -> list[tuple[str, str]]:
    select = re.search(r'<select[^>]*data-field="mode".*?</select>', out, re.S)
    assert select, out
    return re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select.group(0))


def test_enum_labels_show_labels_in_the_labels_order_and_keep_ids_as_values(
    env: SandboxedEnvironment,
) -> None:
    prop = {
        "type": "string",
        "enum": ["body_field", "link_header", "none", "unlabelled"],  # sorted by a generator
        "x-enum-labels": {
            "none": "None",
            "link_header": "Link header",
            "body_field": "Next-URL field <in the body>",
        },
    }
    out = render_config_panel(env, _enum_spec(prop), "x_1", "", {"mode": "link_header"}, [])
    assert _options(out) == [
        ("", "&mdash;"),
        ("none", "None"),
        ("link_header", "Link header"),
        ("body_field", "Next-URL field &lt;in the body&gt;"),
        ("unlabelled", "unlabelled"),
    ]
    assert '<option value="link_header" selected>Link header</option>' in out


def test_enum_labels_of_non_string_values_are_keyed_by_json(env: SandboxedEnvironment) -> None:
    prop = {"enum": [1, 2, True], "x-enum-labels": {"1": "One", "true": "Yes"}}
    out = render_config_panel(env, _enum_spec(prop), "x_1", "", {"mode": 2}, [])
    assert _options(out)[1:] == [("1", "One"), ("true", "Yes"), ("2", "2")]
    assert "data-json" in control(out, "mode")


def test_one_of_const_title_is_an_enum_with_labels(env: SandboxedEnvironment) -> None:
    prop = {"oneOf": [{"const": "asc", "title": "Ascending"}, {"const": "desc"}]}
    out = render_config_panel(env, _enum_spec(prop), "x_1", "", {}, [])
    assert 'data-kind="enum"' in control(out, "mode")
    assert _options(out)[1:] == [("asc", "Ascending"), ("desc", "desc")]
