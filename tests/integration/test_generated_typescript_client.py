"""The /api/v1 document generates a TypeScript client: @hey-api/openapi-ts builds one (the
fetch client, types and SDK) without a single warning, and tsc type-checks it in strict mode
together with tests/typescript_client/lifecycle.ts, a workflow's whole lifecycle written
against it (create, save draft, publish, start with an idempotency key, follow the run
event stream to the end, page through runs, search, export, import).

The generator and compiler are the versions pinned in tests/typescript_client/
package-lock.json, which ``make typescript-client`` (a step of ``make test``) installs with
npm into ``<virtualenv>/typescript-client``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parents[1] / "typescript_client"
TOOLS = Path(sys.prefix) / "typescript-client" / "node_modules" / ".bin"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PROGRESS = [
    re.compile(r"@hey-api/openapi-ts v[0-9.]+"),
    re.compile(r"\[Job \d+\] ⏳ Generating from 1 input:"),
    re.compile(r"\[Job \d+\]\s+\[1\] openapi\.json"),
    re.compile(r"\[Job \d+\] ✅ Done! Your output is in \S+"),
]
"""Every line the generator prints on a clean run: any other line (a warning, a validation
finding, an unsupported construct) fails the test."""


def run(tool: str, *args: str, cwd: Path) -> str:
    """Run ``tool`` from the pinned tools with ``args`` in ``cwd``; its output (stdout and
    stderr, colours off), after asserting exit status 0."""
    path = TOOLS / tool
    assert path.exists(), f"{path} is missing: run `make typescript-client`"
    done = subprocess.run(
        [str(path), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"},
    )
    output = ANSI.sub("", done.stdout + done.stderr)
    assert done.returncode == 0, output
    return output


def unexpected_lines(output: str) -> list[str]:
    """The lines of the generator's ``output`` that are not its progress report."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return [line for line in lines if not any(p.fullmatch(line) for p in PROGRESS)]


def test_only_progress_lines_pass() -> None:
    clean = "@hey-api/openapi-ts v0.95.0\n\n[Job 1] ⏳ Generating from 1 input:\n"
    clean += "[Job 1]   [1] openapi.json\n[Job 1] ✅ Done! Your output is in /tmp/x/client\n"
    assert unexpected_lines(clean) == []
    warned = clean + "❗️ SDK warning: unsupported security scheme.\n"
    assert unexpected_lines(warned) == ["❗️ SDK warning: unsupported security scheme."]


async def test_the_document_generates_a_typescript_client_that_type_checks(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    document = await client.get("/schema/openapi.json")
    assert document.status_code == 200, document.text
    (tmp_path / "openapi.json").write_text(document.text)
    for name in ("openapi-ts.config.mjs", "tsconfig.json", "lifecycle.ts"):
        shutil.copy(HERE / name, tmp_path / name)

    args = ("--file", "openapi-ts.config.mjs", "--no-log-file")
    output = await asyncio.to_thread(run, "openapi-ts", *args, cwd=tmp_path)
    assert unexpected_lines(output) == [], output
    assert (tmp_path / "client" / "sdk.gen.ts").exists(), output

    checked = await asyncio.to_thread(run, "tsc", "--project", "tsconfig.json", cwd=tmp_path)
    assert checked.strip() == "", checked
