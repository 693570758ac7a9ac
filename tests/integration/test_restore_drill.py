"""The restore drill against the embedded PostgreSQL: a dump of a database with
workflows, runs, a credential and a webhook secret restores with everything counted and
every secret decrypting; a wrong key, an existing target and the source itself are refused."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import msgspec
import pytest

from backend import crypto
from backend.cli import main
from backend.cli.restore_drill import DrillError, drill
from backend.embedded import EmbeddedPostgres
from backend.runtime import Runtime
from backend.services.triggers import webhooks
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.encrypted_settings import KEY, settings  # noqa: F401  (the fixture)
from tests.integration.flows import publish, start_manual

pytestmark = pytest.mark.integration


def _new_name() -> str:
    return f"drill_{uuid.uuid4().hex[:12]}"


async def _seed(client: httpx.AsyncClient, runtime: Runtime) -> dict[str, Any]:
    r = await client.post(
        "/api/credentials",
        json={"name": "CRM", "type": "bearer", "data": {"token": "tok-restore-drill-0123"}},
    )
    assert r.status_code == 201, r.text
    wf = await publish(
        client,
        diagram(
            [node("start", "trigger.manual"), node("set", "control.set", mapping={"n": "=1"})],
            [edge("start", "set")],
        ),
    )
    for n in range(3):
        assert await wait_for_run(runtime, await start_manual(client, wf, {"n": n})) == "succeeded"
    async with runtime.sessionmaker() as session, session.begin():
        await webhooks.set_secret(session, uuid.UUID(wf["id"]), "hook-secret-for-the-drill")
    return wf


async def test_restore_drill_restores_a_running_database_and_checks_it(
    client: httpx.AsyncClient,
    runtime: Runtime,
    worker: Any,
    settings: Settings,  # noqa: F811
    pg_server: EmbeddedPostgres,
) -> None:
    await _seed(client, runtime)
    target = _new_name()
    report = await drill(settings, pg_server.url_for(target))
    assert report.passed, "\n".join(report.lines())
    counts = report.source_counts
    assert (counts["workflows"], counts["runs"], counts["credentials"]) == (1, 3, 1)
    assert counts["workflow_versions"] >= 1 and counts["webhook_secrets"] == 1
    assert counts["step_runs"] >= 6 and counts["audit_log"] > 0
    assert report.restored_counts == counts
    assert (report.credentials_opened, report.secrets_opened) == (1, 1)
    assert report.restored_revision == report.head_revision == report.source_revision
    assert report.dump_bytes > 0
    assert not pg_server.database_exists(target)  # dropped after the checks

    # with another key the restore is useless: the drill says which secret fails
    wrong = msgspec.structs.replace(settings, encryption_key=crypto.generate_key())
    report = await drill(wrong, pg_server.url_for(_new_name()))
    assert not report.passed
    assert any("does not decrypt" in problem for problem in report.problems), report.problems
    assert report.restored_counts == counts  # the data itself restored


async def test_restore_drill_never_overwrites_a_database(
    settings: Settings,  # noqa: F811
    pg_server: EmbeddedPostgres,
) -> None:
    existing = _new_name()
    pg_server.create_database(existing)
    with pytest.raises(DrillError, match="exists: the drill restores into a new database only"):
        await drill(settings, pg_server.url_for(existing))
    assert pg_server.database_exists(existing)
    with pytest.raises(DrillError, match="names the source database itself"):
        await drill(settings, settings.database_url)


def test_restore_drill_command_keeps_the_dump_when_asked(
    migrated_url: str,
    pg_server: EmbeddedPostgres,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABASE_URL", migrated_url)
    monkeypatch.setenv("RAILYARD_ENCRYPTION_KEY", KEY)
    target = _new_name()
    dump = tmp_path / "railyard.dump"
    code = main(
        ["restore-drill", "--target-url", pg_server.dsn_for(target), "--dump", str(dump), "--keep"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "restore drill passed" in out and "credentials: snapshot" in out
    assert dump.stat().st_size > 0 and pg_server.database_exists(target)
