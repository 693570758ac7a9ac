"""Contract fuzzing: schemathesis drives every operation of the OpenAPI document.

The app is served by uvicorn on a local port (in the test's event loop) over a seeded
database: an admin with an API token, a published workflow (its id and webhook token), a
run and a credential. The schemathesis CLI then generates requests from the document,
valid and invalid, sends them with the admin's token and checks every answer: no server
error, every status, header, content type and body documented, every request the document
allows accepted and every request it forbids refused, 401 without the token, 405 with
``Allow`` for methods an operation does not have. Bounded by ``MAX_EXAMPLES`` per operation
(a fixed seed, so runs are reproducible).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from backend.runtime import Runtime
from backend.services.identity import accounts, api_tokens
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.served_app import served_app

pytestmark = pytest.mark.integration

MAX_EXAMPLES = 8
SEED = 20261201


@pytest_asyncio.fixture
async def served(settings: Settings, runtime: Runtime) -> AsyncIterator[str]:
    """The app on ``http://127.0.0.1:<port>`` (the returned base URL)."""
    async with served_app(settings, runtime) as base:
        yield base


async def _seed(runtime: Runtime, base: str) -> dict[str, Any]:
    """An admin token and one of each resource; returns the token and the ids."""
    async with runtime.sessionmaker() as session, session.begin():
        admin = await accounts.create_user(
            session, "fuzz@example.com", "tangled ribbon orchard 9", role="admin"
        )
        _, token = await api_tokens.create_token(session, admin.id, "contract")
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers) as c:
        wf = (await c.post("/api/workflows", json={"name": "fuzzed"})).json()
        d = diagram(
            [
                node("hook", "trigger.webhook", methods="GET,POST,PUT,PATCH,DELETE"),
                node("set_1", "control.set", mapping={"n": "=body.n"}),
            ],
            [edge("hook", "set_1")],
        )
        assert (await c.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})).is_success
        assert (await c.post(f"/api/workflows/{wf['id']}/publish")).is_success
        run = (await c.post(f"/api/workflows/{wf['id']}/runs", json={"input": {}})).json()
        cred = (
            await c.post(
                "/api/credentials", json={"name": "k", "type": "bearer", "data": {"token": "t"}}
            )
        ).json()
    return {
        "token": token,
        "workflow_id": wf["id"],
        "hook": wf["webhook_url"].rsplit("/", 1)[1],
        "run_id": run["run_id"],
        "credential_id": cred["id"],
    }


async def test_api_contract(served: str, runtime: Runtime, tmp_path: Path) -> None:
    seeded = await _seed(runtime, served)
    config = tmp_path / "schemathesis.toml"
    config.write_text(
        "[parameters]\n"
        f'"path.workflow_id" = "{seeded["workflow_id"]}"\n'
        f'"path.run_id" = "{seeded["run_id"]}"\n'
        f'"path.credential_id" = "{seeded["credential_id"]}"\n'
        f'"path.token" = "{seeded["hook"]}"\n'
        # A credential's type must be one the installed connectors declare and its `data`
        # must match that type's own schema (GET /api/credentials/types), and an error
        # workflow must exist: known only at run time, so a schema-valid body may still be
        # refused with 400 naming the field.
        "[[operations]]\n"
        'include-operation-id-regex = "^(create_credential|update_credential|update_workflow)$"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409"]\n'
        # A grant's level set depends on the object (workflows and projects: read, run, edit,
        # manage; credentials: use, manage) and the subject must be an existing user or
        # group; a new account's password must also pass the common-password list and
        # must not contain the email: refused with 400 naming the field.
        "[[operations]]\n"
        'include-operation-id-regex = "^(set_(workflow|credential|project)_grant|create_user)$"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409"]\n'
        # An import document's references must name nodes of its diagram, and its format
        # and version must be ones this Railyard reads: refused with 400 naming the place.
        "[[operations]]\n"
        'include-operation-id-regex = "^(import_workflow|import_into_draft)$"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409"]\n'
        # An OpenAPI document (given as text or fetched from its URL) must be a valid
        # OpenAPI 3.0/3.1 document: refused with 400 naming the field and the place.
        "[[operations]]\n"
        'include-operation-id-regex = "^(import_connector|diff_imported_connector)$"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409"]\n'
        # A test event needs a connector trigger in the stored draft (earlier requests
        # replaced it at random) and the node it names: refused with 400 naming the field.
        "[[operations]]\n"
        'include-operation-id = "fetch_trigger_sample"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409", "502", "504"]\n'
        # A step or node named in the body must exist in the run's version or the stored
        # draft (earlier requests replaced it at random); search queries have a syntax,
        # audit dates are ISO 8601 dates or date-times and diffed versions must exist, none
        # of which a JSON Schema string states: refused with 400 naming the field.
        "[[operations]]\n"
        'include-operation-id-regex = "^(replay_run|pin_data|search|'
        "compare_versions|list_audit_entries|export_audit_entries|"
        'expression_fields|infer_body_schema|expression_preview)$"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409"]\n'
        # A list's `cursor` is opaque: only one the list handed out (its `next_cursor`)
        # names a place in it, which no JSON Schema string states: any other is refused
        # with 400 naming `cursor`.
        "[[operations]]\n"
        'include-operation-id-regex = "^list_(?!audit_entries$)"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409"]\n'
        # Earlier requests may archive the workflow: its webhook then answers 410.
        "[[operations]]\n"
        'include-operation-id-regex = "^(receive|test)_webhook_"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "3xx", "401", "403", "404", "409", "410", "429", "5xx"]\n'
        # Publishing compiles the stored draft, which earlier requests replaced at random.
        "[[operations]]\n"
        # A test run compiles the stored draft too (422 with its diagnostics).
        'include-operation-id-regex = "^(publish_workflow|start_test_run)$"\n'
        "checks.positive_data_acceptance.expected-statuses = "
        '["2xx", "400", "401", "403", "404", "409", "422"]\n'
        # Every string field refuses U+0000 and lone surrogates with a 400 naming the field
        # (PostgreSQL cannot store them; the storable-text tests cover that rule), which no
        # JSON Schema string type states: generated text here is storable UTF-8.
        "[generation]\n"
        'codec = "utf-8"\n'
        "allow-x00 = false\n"
    )
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{served}/schema/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--phases",
        "examples,coverage,fuzzing",
        "--header",
        f"Authorization: Bearer {seeded['token']}",
        "--request-timeout",
        "30",
        "--suppress-health-check",
        "all",
        "--output-truncate",
        "false",
    ]
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,  # schemathesis keeps its crash cache in the working directory
    )
    out, _ = await proc.communicate()
    report = out.decode(errors="replace")
    assert proc.returncode == 0, report
