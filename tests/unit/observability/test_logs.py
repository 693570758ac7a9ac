"""Structured logs: JSON lines with the bound request, run and step ids; plain lines for
``railyard dev``."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from backend.observability import logs


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    logs.clear()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def test_json_lines_carry_the_bound_ids(restore_root: None) -> None:
    out = io.StringIO()
    logs.configure("INFO", fmt="json", stream=out)
    logs.bind(run_id="r-1", step_id="http_1")
    logging.getLogger("railyard.test").info("step %s done", "http_1")
    logs.clear()
    logs.bind(request_id="abc123")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("railyard.test").exception("request failed")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["event"] == "step http_1 done" and first["level"] == "info"
    assert first["run_id"] == "r-1" and first["step_id"] == "http_1"
    assert first["logger"] == "railyard.test" and first["timestamp"].endswith("Z")
    assert second["request_id"] == "abc123" and "run_id" not in second
    assert "ValueError: boom" in second["exception"]


def test_plain_lines_for_dev(restore_root: None) -> None:
    out = io.StringIO()
    logs.configure("INFO", fmt="plain", stream=out)
    logs.bind(run_id="r-2")
    logging.getLogger("railyard.test").warning("slow step")
    line = out.getvalue().strip()
    assert "slow step" in line and "run_id=r-2" in line and not line.startswith("{")


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="RAILYARD_LOG_FORMAT"):
        logs.configure("INFO", fmt="xml")


def test_plain_tracebacks_have_no_local_variables(restore_root: None) -> None:
    """A dev log error is its line plus Python's own traceback: no frame locals (rich's
    default would print the 100 KB body below, once per frame)."""
    out = io.StringIO()
    logs.configure("INFO", fmt="plain", stream=out)

    def fail(body: str) -> None:
        raise ValueError("boom")

    try:
        fail("x" * 100_000)
    except ValueError:
        logging.getLogger("railyard.test").exception("job failed")
    text = out.getvalue()
    first, *rest = text.splitlines()
    assert "job failed" in first and "[railyard.test]" in first
    assert rest[0] == "Traceback (most recent call last):", rest[:3]
    assert rest[-1] == "ValueError: boom"
    assert "xxxxxxxxxx" not in text and "locals" not in text
    assert len(text) < 2_000, len(text)


def test_the_process_handler_redacts_the_secrets_of_the_running_attempt(
    restore_root: None,
) -> None:
    """Whatever library logs while an attempt runs (httpx names every URL it calls), the
    line loses the secrets of the credentials that attempt loaded (issue 29, finding 1)."""
    from connectors.sdk.context import ActionContext, ActionInfo, _current
    from connectors.sdk.redaction import secret_forms

    out = io.StringIO()
    logs.configure("INFO", fmt="plain", stream=out)
    context = ActionContext(ActionInfo("r", "w", "s", 1, "k", "http.request"))
    context.secret_forms = secret_forms(["api-key-5e1"])
    token = _current.set(context)
    try:
        logging.getLogger("httpx").warning("GET https://a.example/?key=%s", "api-key-5e1")
    finally:
        _current.reset(token)
    assert "api-key-5e1" not in out.getvalue() and "?key=[redacted]" in out.getvalue()
