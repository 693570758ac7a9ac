"""Every page template renders with the context the page controllers pass."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
from types import SimpleNamespace as NS

import msgspec
import pytest
from jinja2.sandbox import SandboxedEnvironment

from backend.engine.states import RUN_STATUSES
from frontend.forms import STATIC_DIR, create_environment

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
EVIL = "<script>alert(1)</script>"
USER = NS(email="ada@example.com", display_name=EVIL)


@pytest.fixture(scope="module")
def env() -> SandboxedEnvironment:
    return create_environment()


def render(env: SandboxedEnvironment, name: str, **ctx: object) -> str:
    ctx.setdefault("user", USER)
    ctx.setdefault("csrf_token", "tok-123")
    ctx.setdefault("request", None)
    ctx.setdefault("can", lambda _name: True)
    for flag in ("can_edit", "can_run", "can_manage", "can_control"):
        ctx.setdefault(flag, True)
    ctx.setdefault("manageable", set())
    return env.get_template(name).render(**ctx)


def test_base_carries_csrf_token_for_htmx_and_logout(env: SandboxedEnvironment) -> None:
    out = render(env, "workflows.html", workflows=[])
    assert '<meta name="csrf-token" content="tok-123">' in out
    assert """hx-headers='{"X-CSRFToken": "tok-123"}'""" in out
    assert '<form method="post" action="/logout"' in out
    assert out.count('name="_csrf_token" value="tok-123"') == 2  # logout + new workflow
    assert "/static/vendor/htmx/htmx.min.js" in out
    assert EVIL not in out


def test_login(env: SandboxedEnvironment) -> None:
    out = render(env, "login.html", user=None, error=EVIL, next="/runs")
    for marker in ('id="email"', 'id="password"', 'type="submit"', 'name="next" value="/runs"'):
        assert marker in out
    assert 'name="_csrf_token" value="tok-123"' in out
    assert EVIL not in out and "&lt;script&gt;" in out
    assert "/logout" not in out


def test_workflows(env: SandboxedEnvironment) -> None:
    wf = NS(
        id="w-1",
        name=EVIL,
        description="d",
        active_version=2,
        updated_at=NOW,
        webhook_url="http://h/hooks/x",
    )
    out = render(env, "workflows.html", workflows=[wf])
    assert 'id="new-workflow-name"' in out and 'id="create-workflow"' in out
    assert 'href="/workflows/w-1/designer"' in out
    assert 'href="/runs?workflow_id=w-1"' in out
    assert "v2" in out and "http://h/hooks/x" in out
    assert EVIL not in out


def test_designer_embeds_json_safely(env: SandboxedEnvironment) -> None:
    diagram = {"nodes": [{"id": "a", "type": "t", "label": "</script>" + EVIL}], "edges": []}
    out = render(
        env,
        "designer.html",
        workflow=NS(id="w-1", name=EVIL, active_version=None, webhook=None),
        diagram_json=json.dumps(diagram),
        catalog_json="[]",
    )
    assert EVIL not in out and "</script><script>" not in out
    assert 'data-workflow-id="w-1"' in out
    assert "&#34;nodes&#34;" in out  # attribute-escaped JSON
    for id_ in ("toolbar", "save-btn", "publish-btn", "run-btn", "status", "canvas", "palette"):
        assert f'id="{id_}"' in out
    assert 'id="config-panel"' in out and 'id="diagnostics"' in out and 'id="webhook-url"' in out
    assert '<script type="module" src="/static/js/designer.js">' in out
    assert re.search(r'id="webhook-url" class="webhook-url" hidden>', out)
    assert 'id="diagnostics-toggle"' in out and 'aria-expanded="true"' in out


def test_designer_for_a_reader_has_no_save_publish_or_run(env: SandboxedEnvironment) -> None:
    out = render(
        env,
        "designer.html",
        workflow=NS(id="w-1", name="n", active_version=2, webhook=None),
        diagram_json="{}",
        catalog_json="[]",
        can_edit=False,
        can_run=False,
        can_manage=False,
    )
    for id_ in ("save-btn", "publish-btn", "run-btn", "settings-btn", "access-link"):
        assert f'id="{id_}"' not in out
    assert 'id="read-only-badge"' in out


def test_run_detail_without_run_permission_has_no_controls(env: SandboxedEnvironment) -> None:
    out = render(
        env, "run_detail.html", run=_run(), diagram_json='{"nodes": []}', can_control=False
    )
    assert "data-run-action" not in out and "data-rerun" not in out


def test_pages_hide_what_the_user_may_not_do(env: SandboxedEnvironment) -> None:
    nothing = lambda _name: False  # noqa: E731
    assert 'id="new-workflow-form"' not in render(env, "workflows.html", workflows=[], can=nothing)
    assert "/admin/groups" not in render(env, "workflows.html", workflows=[], can=nothing)
    assert "/admin/groups" in render(env, "workflows.html", workflows=[])


def test_designer_webhook_box_shows_methods_full_url_and_copy(env: SandboxedEnvironment) -> None:
    hook = {"url": "http://h/hooks/tok/" + EVIL, "methods": ["POST", "PUT"], "enabled": False}
    out = render(
        env,
        "designer.html",
        workflow=NS(id="w-1", name="n", active_version=2, webhook=hook),
        diagram_json="{}",
        catalog_json="[]",
    )
    assert re.search(r'id="webhook-url" class="webhook-url">', out)
    assert (
        '<span class="badge badge-method">POST</span><span class="badge badge-method">PUT</span>'
        in out
    )
    assert ">http://h/hooks/tok/&lt;script&gt;alert(1)&lt;/script&gt;</code>" in out
    assert 'id="webhook-copy"' in out and 'id="webhook-copied"' in out
    assert re.search(r'id="webhook-disabled"[^>]*>disabled<', out)  # shown: not hidden


def _run() -> NS:
    attempt = NS(
        number=1,
        status="failed",
        worker="w1",
        error={"message": EVIL},
        started_at=NOW,
        finished_at=NOW,
        duration_ms=1500,
        wait_ms=None,
    )
    step = NS(
        step_id="http_1",
        label="Call",
        type="http.request",
        status="failed",
        input={"x": EVIL},
        output=None,
        error={"message": EVIL},
        started_at=NOW,
        finished_at=NOW,
        duration_ms=1500,
        attempts=[attempt],
    )
    return NS(
        id="r-1",
        workflow_id="w-1",
        workflow_name="Flow",
        status="running",
        version=3,
        trigger="manual",
        input={"a": 1},
        output=None,
        error=None,
        created_at=NOW,
        finished_at=None,
        duration_ms=None,
        steps=[step],
        parent_run_id=None,
        children=[],
    )


def test_runs(env: SandboxedEnvironment) -> None:
    run = _run()
    out = render(env, "runs.html", runs=[run], workflow_id="w-1", status="failed")
    assert 'class="run-row" data-status="running"' in out
    assert 'href="/runs/r-1"' in out
    assert 'hx-get="/runs?workflow_id=w-1&amp;status=failed"' in out
    out = render(env, "runs.html", runs=[], workflow_id=None, status=None)
    assert 'hx-get="/runs"' in out


def test_run_detail(env: SandboxedEnvironment) -> None:
    out = render(env, "run_detail.html", run=_run(), diagram_json='{"nodes": []}')
    assert 'data-status="running" id="run-status"' in out
    assert '<section class="step card" data-step-id="http_1" data-status="failed"' in out
    assert 'data-events-url="/runs/r-1/events"' in out
    assert "1.5 s" in out
    assert EVIL not in out
    # The node type's id only in a tooltip (no labels passed: the id is the fallback text).
    assert '<span class="step-type muted small" title="http.request">http.request</span>' in out
    out = render(
        env,
        "run_detail.html",
        run=_run(),
        diagram_json="{}",
        type_labels={"http.request": "HTTP Request"},
    )
    assert '<span class="step-type muted small" title="http.request">HTTP Request</span>' in out
    # Errors are shown readably (message first), the raw JSON behind a disclosure.
    assert '<span class="error-message">&lt;script&gt;alert(1)&lt;/script&gt;</span>' in out
    assert out.count("<summary>Raw JSON</summary>") == 2  # the step's and its attempt's
    assert 'data-run-action="pause" >' in out and 'data-run-action="resume" hidden' in out


def test_run_detail_shows_retry_waits_reason_and_child_runs(env: SandboxedEnvironment) -> None:
    run = _run()
    first = NS(**{**vars(run.steps[0].attempts[0]), "number": 1, "wait_ms": None})
    second = NS(**{**vars(first), "number": 2, "wait_ms": 2500})
    step = NS(
        **{
            **vars(run.steps[0]),
            "attempts": [first, second],
            "error": {"message": "boom", "child_run_id": "c-9"},
        }
    )
    run = NS(
        **{
            **vars(run),
            "status": "cancelled",
            "error": {"message": "cancelled by user", "kind": "cancelled"},
            "steps": [step],
            "parent_run_id": "p-1",
            "children": [NS(run_id="c-9", step_id="http_1", index=0, status="failed")],
        }
    )
    out = render(env, "run_detail.html", run=run, diagram_json='{"nodes": []}')
    assert "Cancelled: cancelled by user" in out
    assert '<td class="nowrap attempt-wait">2.5 s</td>' in out
    assert 'href="/runs/c-9"' in out and 'id="parent-run-link" href="/runs/p-1"' in out
    assert 'data-run-action="cancel" hidden' in out


def test_error(env: SandboxedEnvironment) -> None:
    out = render(env, "error.html", status_code=404, message=EVIL)
    assert "404" in out and "Not found" in out and EVIL not in out


@pytest.mark.parametrize("package", ["htmx", "htmx-ext-sse"])
def test_vendored_htmx_is_pinned_with_licence(package: str) -> None:
    folder = STATIC_DIR / "vendor" / package
    assert (folder / "LICENSE").read_text().strip()
    assert (folder / "VERSION").read_text().strip().startswith("2.")


def test_error_accepts_status_code_under_either_name(env: SandboxedEnvironment) -> None:
    out = render(env, "error.html", status_code_=404, message="gone")
    assert "Not found" in out and 'id="error-code">404<' in out
    out = render(env, "error.html", message="boom")
    assert "Something went wrong" in out


def test_runs_status_filter_offers_every_run_status_paused_included(
    env: SandboxedEnvironment,
) -> None:
    out = render(env, "runs.html", runs=[], workflow_id=None, status="paused")
    options = re.findall(r'<option value="([a-z_]+)"( selected)?>([^<]+)</option>', out)
    assert [value for value, _, _ in options] == [s.value for s in RUN_STATUSES]
    assert ("paused", " selected", "Paused") in options
    assert ("timed_out", "", "Timed out") in options


@pytest.mark.parametrize(
    ("status", "shown"),
    [
        ("running", {"pause", "cancel"}),
        ("paused", {"resume", "cancel"}),
        ("queued", {"cancel"}),
        ("failed", {"failed_step", "start"}),
        ("succeeded", {"start"}),
    ],
)
def test_run_detail_controls_follow_the_actions_of_the_run_status(
    env: SandboxedEnvironment, status: str, shown: set[str]
) -> None:
    run = NS(**{**vars(_run()), "status": status})
    out = render(env, "run_detail.html", run=run, diagram_json="{}")
    visible = set(re.findall(r'data-run-action="(\w+)" >', out))
    visible |= set(re.findall(r'data-rerun="(\w+)"', out))
    assert visible == shown
    # scripts get the same list (run-detail.js reads data-run-statuses)
    match = re.search(r'data-run-statuses="([^"]+)"', out)
    assert match is not None
    statuses = json.loads(html.unescape(match.group(1)))
    assert statuses == msgspec.json.decode(msgspec.json.encode(RUN_STATUSES))
    assert {s["value"]: s["actions"] for s in statuses}["paused"] == ["resume", "cancel"]
