"""Readable run errors (frontend.display) and the designer's webhook box (webhook_view)."""

from __future__ import annotations

import re

import pytest
from jinja2.sandbox import SandboxedEnvironment

from backend.engine.nodes.trigger_webhook import webhook_config
from frontend.display import ErrorView, error_view
from frontend.forms import create_environment
from frontend.webhook_view import webhook_view

EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def env() -> SandboxedEnvironment:
    return create_environment()


def test_action_error_message_kind_and_flattened_details() -> None:
    error = {
        "message": "HTTP 503 Service Unavailable from GET https://api.example.com/x",
        "kind": "http_503",
        "retryable": True,
        "retry_after": 2.5,
        "details": {"status": 503, "url": "https://api.example.com/x", "extra": None},
    }
    view = error_view(error)
    assert view.message == error["message"]
    assert view.kind == "http_503"
    assert view.details == [
        ("Retryable", "yes"),
        ("Retry after (s)", "2.5"),
        ("Status code", "503"),
        ("URL", "https://api.example.com/x"),
    ]
    assert view.raw is error


def test_engine_error_fields_are_humanised_and_nested_values_shown_as_json() -> None:
    view = error_view(
        {"message": "bad", "kind": "expression_error", "field": "url", "path_parts": [1, "a"]}
    )
    assert view.details == [("Field", "url"), ("Path parts", '[1, "a"]')]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("worker lost", ErrorView("worker lost", raw="worker lost")),
        ({}, ErrorView("error", raw={})),
        ({"kind": "timeout"}, ErrorView("error", "timeout", raw={"kind": "timeout"})),
        ([1, 2], ErrorView("[1, 2]", raw=[1, 2])),
        ({"message": 42, "details": "text"}, None),
    ],
)
def test_odd_shapes_still_render(error: object, expected: ErrorView | None) -> None:
    view = error_view(error)
    if expected is not None:
        assert view == expected
    else:
        assert view.message == "42" and view.details == [("Details", "text")]


def test_error_block_renders_message_kind_definition_list_and_raw_disclosure(
    env: SandboxedEnvironment,
) -> None:
    template = env.from_string('{% import "_macros.html" as m %}{{ m.error_block(e) }}')
    out = template.render(
        e={"message": EVIL, "kind": "http_404", "details": {"status": 404, "url": EVIL}}
    )
    assert EVIL not in out and "&lt;script&gt;" in out
    assert '<span class="badge error-kind" title="Error kind">http_404</span>' in out
    assert re.search(r'<span class="error-message">&lt;script&gt;', out)
    assert "<dt>Status code</dt><dd>404</dd>" in out
    assert "<dt>URL</dt><dd>&lt;script&gt;alert(1)&lt;/script&gt;</dd>" in out
    # The full object is there, closed, behind "Raw JSON".
    assert '<details class="error-raw"><summary>Raw JSON</summary>' in out
    assert '<pre class="json json-error">' in out and '"kind": "http_404"' in out


def test_error_block_without_kind_or_details(env: SandboxedEnvironment) -> None:
    template = env.from_string('{% import "_macros.html" as m %}{{ m.error_block(e) }}')
    out = template.render(e={"message": "lease expired"})
    assert "error-kind" not in out and "<dl" not in out
    assert '<span class="error-message">lease expired</span>' in out


@pytest.mark.parametrize(
    ("config", "url", "methods", "enabled"),
    [
        ({}, "https://r.example/hooks/tok", ["POST"], True),
        (
            {"methods": "post, put", "path_suffix": "/github/push/"},
            "https://r.example/hooks/tok/github/push",
            ["POST", "PUT"],
            True,
        ),
        ({"methods": " , ", "enabled": False}, "https://r.example/hooks/tok", ["POST"], False),
    ],
)
def test_webhook_view(config: dict, url: str, methods: list[str], enabled: bool) -> None:
    view = webhook_view("https://r.example/", "tok", webhook_config(config))
    assert view == {"url": url, "methods": methods, "enabled": enabled}


def test_inline_doc_renders_restructuredtext_literals_and_roles_as_code() -> None:
    from frontend.display import inline_doc

    assert str(inline_doc("Stable multi-key sort; ``None`` last.")) == (
        "Stable multi-key sort; <code>None</code> last."
    )
    assert str(inline_doc("See :class:`~a.B` and <b>")) == "See <code>a.B</code> and &lt;b&gt;"
    assert str(inline_doc("``<script>``")) == "<code>&lt;script&gt;</code>"
    assert str(inline_doc(None)) == ""


def test_the_catalog_page_shows_no_raw_restructuredtext() -> None:
    from backend.services.connectors.catalog import load_catalog
    from frontend.display import inline_doc

    for spec in load_catalog().specs.values():
        assert "``" not in str(inline_doc(spec.description)), spec.type
