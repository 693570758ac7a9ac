"""The examples of the documentation, run as printed against a ``railyard dev`` server:
signing in from a script (curl and Python httpx, docs/security.md) and the diagram JSON
format (docs/designer.md). No browser: these are what a script author copies."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx

from e2e.conftest import REPO_ROOT, RailyardServer

DOCS = REPO_ROOT / "docs"
RUN_SECONDS = 60


def section(page: Path, heading: str) -> str:
    """The text of ``page`` under the Markdown heading ``heading`` (up to the next heading
    of the same or a higher level; ``#`` lines inside code blocks are not headings)."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = page.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading) + 1
    fenced = False
    for number in range(start, len(lines)):
        line = lines[number]
        fenced ^= line.startswith("```")
        marks = len(line) - len(line.lstrip("#"))
        if not fenced and 0 < marks <= level and line[marks : marks + 1] == " ":
            return "\n".join(lines[start:number]) + "\n"
    return "\n".join(lines[start:]) + "\n"


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced code blocks of ``text`` in ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", text, flags=re.M | re.S)


def run(args: list[str], env: dict[str, str]) -> str:
    """Run ``args``; its stdout (AssertionError with both outputs when it fails)."""
    done = subprocess.run(
        args, env={**os.environ, **env}, capture_output=True, text=True, timeout=RUN_SECONDS
    )
    assert done.returncode == 0, (
        f"{args[0]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def test_signing_in_from_a_script_works_as_documented(railyard_server: RailyardServer) -> None:
    """The curl walk-through signs in and mints a token, the token one-liner reads with
    it, the Python example signs in, mints a token and lists workflows with it; a login
    without the CSRF header is refused with 403 as the page says."""
    text = section(DOCS / "security.md", "### Signing in from a script")
    token_call, walk_through = code_blocks(text, "sh")
    (python_example,) = code_blocks(text, "python")
    env = {
        "RAILYARD_URL": railyard_server.base_url,
        "RAILYARD_EMAIL": railyard_server.email,
        "RAILYARD_PASSWORD": railyard_server.password,
    }
    out = run(["bash", "-e", "-o", "pipefail", "-c", walk_through], env)
    minted = _last_json(out)
    assert str(minted.get("token", "")).startswith("ry_"), out
    assert minted["scopes"] == ["read"], out
    with_token = {**env, "RAILYARD_TOKEN": str(minted["token"])}
    listed = json.loads(run(["bash", "-e", "-c", token_call], with_token))
    assert isinstance(listed["data"], list) and "has_more" in listed  # the v1 list envelope
    printed = run([sys.executable, "-c", python_example], env)
    page = json.loads(run(["bash", "-e", "-c", token_call], with_token))
    ids = {str(w["id"]) for w in page["data"]}
    assert {line.split(" ", 1)[0] for line in printed.splitlines()} <= ids, printed
    with httpx.Client(base_url=railyard_server.base_url) as client:
        client.get("/login")
        login = {"email": railyard_server.email, "password": railyard_server.password}
        assert client.post("/api/auth/login", json=login).status_code == 403


def _last_json(out: str) -> dict[str, object]:
    """The last JSON object in ``out`` (curl prints the answers one after another)."""
    decoder = json.JSONDecoder()
    found: dict[str, object] = {}
    index = 0
    while (start := out.find("{", index)) >= 0:
        try:
            value, index = decoder.raw_decode(out, start)
        except json.JSONDecodeError:
            index = start + 1
            continue
        if isinstance(value, dict):
            found = value
    return found


def test_the_documented_diagram_publishes_and_runs(railyard_server: RailyardServer) -> None:
    """The diagram printed in docs/designer.md is saved as a draft with no problem,
    publishes, and its webhook answers with the Text template's output."""
    text = section(DOCS / "designer.md", "## The diagram format (JSON)")
    (example,) = code_blocks(text, "json")
    diagram = json.loads(example)
    with httpx.Client(base_url=railyard_server.base_url, timeout=30) as client:
        client.get("/login")
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
        login = {"email": railyard_server.email, "password": railyard_server.password}
        assert client.post("/api/auth/login", json=login).status_code == 200
        wf = client.post("/api/workflows", json={"name": "Documented diagram"}).json()
        saved = client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": diagram})
        assert saved.status_code == 200 and saved.json()["ok"], saved.text
        assert saved.json()["diagnostics"] == [], saved.text
        published = client.post(f"/api/workflows/{wf['id']}/publish")
        assert published.status_code == 201, published.text
        hook = published.json()["webhook_url"]
        answer = httpx.post(hook, json={"id": 7, "qty": 3, "price": 10}, timeout=30)
    assert (answer.status_code, answer.json()) == (200, {"text": "Order 7: 30 EUR"}), answer.text
