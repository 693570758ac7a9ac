"""Fixtures of the browser end-to-end tests.

Railyard is started the way the README starts it (the ``railyard dev`` console script on
the embedded PostgreSQL and Redis), as a subprocess on a free port with a fresh data
directory; the browser is Debian's Chromium driven by Playwright's sync API.

Reusable pieces for further e2e tests:

- ``railyard_server`` (session): a running :class:`RailyardServer` (``base_url``, admin
  ``email`` / ``password``, ``log_path``, ``log_tail()``); :func:`railyard_dev` starts
  another one (with more environment, e.g. a plugin on its ``PYTHONPATH``) for a block.
- ``http_endpoint`` (function): a local HTTP server recording request bodies
  (:class:`RecordingEndpoint`), answering ``200 {"ok": true}``.
- ``browser`` (session) and ``page`` (function; console messages and page errors are
  collected in ``page.console_lines``; a Content-Security-Policy violation reported on
  the console fails the test).
- :func:`login` logs a page in; :data:`ARTIFACTS_DIR` is where screenshots go.

When a test fails, the tail of the server log and the browser console are attached to the
report. Nothing is skipped: a missing Chromium fails the test with a message saying how to
install it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS_DIR = REPO_ROOT / "test-artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
ADMIN_EMAIL = "e2e-admin@example.com"
ADMIN_PASSWORD = "e2e-Secret-password-1"
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under e2e/ is an ``e2e`` test, even when a test forgets the mark."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


# ------------------------------------------------------------------------------ helpers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 150) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


# ------------------------------------------------------------------------------ server


@dataclass
class RailyardServer:
    """A ``railyard dev`` subprocess."""

    base_url: str
    email: str
    password: str
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]

    def log_tail(self, lines: int = 150) -> str:
        return _tail(self.log_path, lines)


def _railyard_executable() -> Path:
    exe = Path(sys.executable).parent / "railyard"
    if not exe.exists():
        pytest.fail(
            f"console script {exe} not found: install Railyard into this virtualenv "
            "(pip install -e '.[test]', or `make install`)"
        )
    return exe


def _wait_ready(proc: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    last = "no answer yet"
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(
                    f"railyard dev exited with code {proc.returncode} before it was ready; "
                    f"log {log_path}:\n{_tail(log_path)}"
                )
            try:
                resp = client.get(f"{base_url}/health/ready")
                if resp.status_code == 200:
                    return
                last = f"{resp.status_code} {resp.text[:200]}"
            except httpx.HTTPError as exc:
                last = repr(exc)
            time.sleep(0.2)
    _stop(proc)
    pytest.fail(
        f"railyard dev not ready after {READY_TIMEOUT:.0f} s (last answer: {last}); "
        f"log {log_path}:\n{_tail(log_path)}"
    )


def _stop(proc: subprocess.Popen[bytes]) -> list[str]:
    """SIGINT (Ctrl-C, as a person stops `make dev`), then SIGTERM, then SIGKILL.

    Returns the signals that were needed beyond SIGINT (empty when Ctrl-C was enough).
    """
    escalations: list[str] = []
    if proc.poll() is not None:
        return escalations
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
        return escalations
    except subprocess.TimeoutExpired:
        escalations.append("SIGTERM")
    proc.terminate()
    try:
        proc.wait(timeout=10)
        return escalations
    except subprocess.TimeoutExpired:
        escalations.append("SIGKILL")
    proc.kill()
    proc.wait(timeout=10)
    return escalations


@contextlib.contextmanager
def railyard_dev(
    name: str = "server", env: dict[str, str] | None = None
) -> Iterator[RailyardServer]:
    """Run ``railyard dev --port <free> --data-dir <tmp>`` with a known admin login (and
    ``env`` added to its environment, e.g. ``PYTHONPATH`` for a plugin) until the block
    ends; then stop it with Ctrl-C and check that everything stopped. Its log is
    ``test-artifacts/railyard-<name>-<xdist worker>.log``."""
    exe = _railyard_executable()
    # The embedded PostgreSQL runs as an unprivileged system user when we are root: the
    # data directory must be traversable by others.
    data_dir = Path(tempfile.mkdtemp(prefix="railyard-e2e-", dir="/tmp"))
    data_dir.chmod(0o755)
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    log_path = ARTIFACTS_DIR / f"railyard-{name}-{worker}.log"
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    environ = {
        **os.environ,
        "RAILYARD_ADMIN_EMAIL": ADMIN_EMAIL,
        "RAILYARD_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "RAILYARD_HTTP_ALLOW_PRIVATE": "1",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    environ.pop("RAILYARD_BASE_URL", None)  # webhook URLs must point at this server
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [str(exe), "dev", "--port", str(port), "--data-dir", str(data_dir)],
            cwd=REPO_ROOT,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = RailyardServer(base_url, ADMIN_EMAIL, ADMIN_PASSWORD, data_dir, log_path, proc)
    try:
        _wait_ready(proc, base_url, log_path)
        yield server
    finally:
        escalations = _stop(proc)
        pid_file = data_dir / "postgres" / "postmaster.pid"
        pg_left = pid_file.exists()
        if not escalations and proc.returncode == 0 and not pg_left:
            shutil.rmtree(data_dir, ignore_errors=True)
    # Only reached on a normal teardown: check that Ctrl-C stopped everything cleanly.
    problems = []
    if escalations:
        problems.append(f"SIGINT did not stop railyard dev; needed {', '.join(escalations)}")
    if proc.returncode != 0:
        problems.append(f"railyard dev exited with code {proc.returncode} after SIGINT")
    if pg_left:
        problems.append(f"PostgreSQL still has {pid_file} after railyard dev exited")
    if problems:
        pytest.fail("; ".join(problems) + f"\nlog {log_path}:\n{_tail(log_path)}")


@pytest.fixture(scope="session")
def railyard_server() -> Iterator[RailyardServer]:
    """``railyard dev --port <free> --data-dir <tmp>`` with a known admin login."""
    with railyard_dev() as server:
        yield server


# ------------------------------------------------------------------------------ endpoint


@dataclass
class RecordingEndpoint:
    """A local HTTP endpoint (127.0.0.1) that records requests and answers 200 {"ok": true}.

    ``hold()`` makes it keep every answer back until ``release()`` (the request is recorded
    first), so a test can look at a run while its HTTP step is still running.
    """

    server: ThreadingHTTPServer
    requests: list[dict[str, Any]] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.gate.set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def json_bodies(self) -> list[Any]:
        with self.arrived:
            return [json.loads(r["body"]) for r in self.requests]

    def hold(self) -> None:
        self.gate.clear()

    def release(self) -> None:
        self.gate.set()

    def wait_for_requests(self, count: int, timeout: float = 15.0) -> None:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(
                    f"local endpoint got {len(self.requests)} requests in {timeout} s, "
                    f"expected {count}"
                )

    def _record(self, request: dict[str, Any]) -> None:
        with self.arrived:
            self.requests.append(request)
            self.arrived.notify_all()


@pytest.fixture
def http_endpoint() -> Iterator[RecordingEndpoint]:
    holder: dict[str, RecordingEndpoint] = {}

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            endpoint = holder["endpoint"]
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            endpoint._record(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                }
            )
            endpoint.gate.wait(timeout=30)
            payload = b'{"ok": true}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    endpoint = RecordingEndpoint(server)
    holder["endpoint"] = endpoint
    thread = threading.Thread(target=server.serve_forever, name="e2e-endpoint", daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        endpoint.release()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# ------------------------------------------------------------------------------ browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Debian Chromium; a missing browser is a failure, never a skip."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's chromium "
            "(`make chromium`, i.e. apt-get install chromium; `make test` does this)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser context and page; console output is kept for failure reports."""
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    lines: list[str] = []
    page.on("console", lambda m: lines.append(f"console.{m.type}: {m.text}"))
    page.on("pageerror", lambda e: lines.append(f"pageerror: {e}"))
    page.on(
        "response",
        lambda r: (
            lines.append(f"HTTP {r.status} {r.request.method} {r.url}") if r.status >= 400 else None
        ),
    )
    page.on("requestfailed", lambda r: lines.append(f"request failed: {r.method} {r.url}"))
    page.console_lines = lines  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()
    # The Content-Security-Policy must break nothing: Chromium reports every blocked
    # inline script, handler, style or load on the console.
    violations = [line for line in lines if "Content Security Policy" in line]
    if violations:
        pytest.fail("Content-Security-Policy violations:\n" + "\n".join(violations))


def login(
    page: Any, server: RailyardServer, email: str | None = None, password: str | None = None
) -> None:
    """Log ``page`` in through the login form (as the admin unless ``email`` / ``password``
    name another account); ends on the workflow list."""
    page.goto(f"{server.base_url}/login")
    page.fill("#email", email or server.email)
    page.fill("#password", password or server.password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server.base_url}/workflows**")


# ------------------------------------------------------------------------------ reports


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the server log tail and the browser console to failed e2e reports."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    server = funcargs.get("railyard_server")
    if isinstance(server, RailyardServer):
        report.sections.append(("railyard server log (tail)", server.log_tail()))
    page = funcargs.get("page")
    lines = getattr(page, "console_lines", None)
    if lines:
        report.sections.append(("browser console", "\n".join(lines[-200:])))
