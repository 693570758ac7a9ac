"""railyard-client (clients/python) against the app served on a real socket: typed models,
pagination over the list envelope, problem details raised as typed exceptions, idempotent
run starts, the run event stream, and the blocking Client next to the AsyncClient."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest
import pytest_asyncio
import railyard_client as ry

from backend.runtime import Runtime
from backend.services.identity import accounts, api_tokens
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.integration.served_app import served_app

pytestmark = pytest.mark.integration

EMAIL, PASSWORD = "client@example.com", "quiet harbour lantern 42"
CHAIN = diagram(
    [node("start", "trigger.manual"), node("double", "control.set", mapping={"n": "=n * 2"})],
    [edge("start", "double")],
)


@pytest_asyncio.fixture
async def served(
    settings: Settings, runtime: Runtime, worker: object
) -> AsyncIterator[tuple[str, str]]:
    """The app's base URL and an API token of an admin (``EMAIL``), with a worker
    running the runs."""
    async with runtime.sessionmaker() as session, session.begin():
        admin = await accounts.create_user(session, EMAIL, PASSWORD, role="admin")
        _, token = await api_tokens.create_token(session, admin.id, "client test")
    async with served_app(settings, runtime) as base:
        yield base, token


async def test_the_async_client_drives_a_workflow_and_pages_its_runs(
    served: tuple[str, str],
) -> None:
    base, token = served
    async with ry.AsyncClient(base, token=token) as api:
        wf = await api.create_workflow("Client doubling", tags=["client"])
        assert isinstance(wf, ry.Workflow) and wf.active_version is None
        saved = await api.save_draft(wf.id, CHAIN)
        assert saved.ok and saved.revision >= 1, saved
        published = await api.publish(wf.id, note="first")
        assert published.version.version == 1 and published.created
        assert [v.version async for v in api.iter_versions(wf.id)] == [1]
        assert (await api.get_workflow(wf.id)).draft is not None

        first = await api.start_run(wf.id, {"n": 21}, idempotency_key="order-21")
        again = await api.start_run(wf.id, {"n": 21}, idempotency_key="order-21")
        assert again.id == first.id
        other = await api.start_run(wf.id, {"n": 1})
        assert other.id != first.id
        # a key names one start of one workflow: another workflow's start is its own run
        elsewhere = await api.create_workflow("Client doubling, elsewhere")
        await api.save_draft(elsewhere.id, CHAIN)
        await api.publish(elsewhere.id)
        theirs = await api.start_run(elsewhere.id, {"n": 2}, idempotency_key="order-21")
        assert theirs.id != first.id
        assert (await api.wait_for_run(theirs.id, timeout=30)).output == {"n": 4}

        events = [e async for e in api.run_events(first.id)]
        assert events and all(e.event == "update" for e in events)
        assert events[-1].run.ended and events[-1].run.id == first.id
        done = await api.wait_for_run(first.id, timeout=30)
        assert done.status == "succeeded" and done.output == {"n": 42}, done
        assert [s.step_id for s in done.steps] == ["start", "double"]
        assert (await api.wait_for_run(other.id, timeout=30)).status == "succeeded"

        # limit=1: every run on a page of its own, the iterator follows next_cursor
        runs = [r async for r in api.iter_runs(workflow_id=wf.id, limit=1)]
        assert {r.id for r in runs} == {first.id, other.id} and len(runs) == 2
        page = await api.page(ry.Run, "/api/v1/runs", workflow_id=wf.id, limit=1)
        assert page.has_more and page.next_cursor and page.next
        assert wf.id in {w.id async for w in api.iter_workflows(limit=1)}

        with pytest.raises(ry.NotFound) as missing:
            await api.get_run(str(uuid.uuid4()))
        assert missing.value.status == 404 and missing.value.instance.startswith("/api/v1/runs/")
        with pytest.raises(ry.InvalidRequest) as bad:
            await api.start_run(wf.id, idempotency_key="k" * 201)
        assert bad.value.type == "urn:railyard:problem:invalid-request"
        assert bad.value.errors[0].parameter == "Idempotency-Key", bad.value.body  # as sent
        assert "200" in bad.value.detail, bad.value.body
        with pytest.raises(ry.InvalidRequest) as unknown:
            await api.update_workflow(wf.id, colour="red")
        assert [e.pointer for e in unknown.value.errors] == ["#/colour"]


async def test_credentials_and_subscriptions_through_the_client(
    served: tuple[str, str],
) -> None:
    base, token = served
    async with ry.AsyncClient(base, token=token) as api:
        cred = await api.create_credential("Billing API", "bearer", {"token": "s3cret"})
        assert cred.secret_fields == ["token"] and "s3cret" not in str(cred)
        assert cred.id in {c.id async for c in api.iter_credentials(type="bearer")}
        assert (await api.get_credential(cred.id)).name == "Billing API"
        await api.delete_credential(cred.id)
        with pytest.raises(ry.NotFound):
            await api.get_credential(cred.id)

        wf = await api.create_workflow("Client subscriptions")
        sub = await api.create_subscription(
            url="http://127.0.0.1:9/hook", events=["run.failed"], workflow_id=wf.id
        )
        assert sub.secret and sub.secret.startswith("whsec_") and sub.workflow_id == wf.id
        listed = [s async for s in api.iter_subscriptions(wf.id)]
        assert [s.id for s in listed] == [sub.id] and listed[0].secret is None
        admin_view = await api.get_subscription(sub.id)
        assert admin_view.url == "http://127.0.0.1:9/hook"
        changed = await api.update_subscription(sub.id, workflow_id=wf.id, enabled=False)
        assert not changed.enabled and changed.events == ["run.failed"]
        changed = await api.update_subscription(
            sub.id, workflow_id=wf.id, events=["run.failed", "run.succeeded"], description="ops"
        )
        assert set(changed.events) == {"run.failed", "run.succeeded"} and not changed.enabled
        assert changed.description == "ops"
        assert [d async for d in api.iter_deliveries(sub.id, workflow_id=wf.id)] == []
        with pytest.raises(ry.InvalidRequest) as bad:
            await api.create_subscription(url="ftp://x", events=["run.failed"], workflow_id=wf.id)
        assert bad.value.errors[0].pointer == "#/url"
        with pytest.raises(ValueError):  # a workflow's subscription belongs to no project
            await api.create_subscription(
                url="http://127.0.0.1:9/hook",
                events=["run.failed"],
                workflow_id=wf.id,
                project_id=str(uuid.uuid4()),
            )
        everywhere = await api.create_subscription(
            url="http://127.0.0.1:9/all", events=["workflow.published"], description="all"
        )
        assert everywhere.workflow_id is None and everywhere.project_id is None
        await api.delete_subscription(everywhere.id)
        await api.delete_subscription(sub.id, workflow_id=wf.id)
        assert [s async for s in api.iter_subscriptions(wf.id)] == []


async def test_search_export_and_import_through_the_client(served: tuple[str, str]) -> None:
    base, token = served
    async with ry.AsyncClient(base, token=token) as api:
        wf = await api.create_workflow("Client searched")
        assert (await api.save_draft(wf.id, CHAIN)).ok
        await api.publish(wf.id)
        runs = [(await api.start_run(wf.id, {"n": n})).id for n in (1, 2)]
        for run_id in runs:
            await api.wait_for_run(run_id, timeout=30)

        query = 'workflow:"Client searched"'
        page = await api.search(query, limit=1)
        assert isinstance(page, ry.SearchPage) and page.scope == "runs" and page.total == 2
        assert page.has_more and isinstance(page.data[0], ry.SearchHit)
        assert page.data[0].url.startswith("http") and page.data[0].kind == "run"  # absolute
        assert page.data[0].detail["finished_at"].endswith("Z"), page.data[0]  # RFC 3339 UTC
        assert [h.id async for h in api.iter_search(query, limit=1)] == runs[::-1]
        oldest = await api.search(query, sort="oldest")
        assert [h.id for h in oldest.data] == runs and oldest.sort == "oldest"
        found = await api.search('"Client searched"', scope="workflows", sort="name")
        assert [h.id for h in found.data] == [wf.id] and found.scope == "workflows"
        with pytest.raises(ry.InvalidRequest) as bad:
            await api.search(query, sort="name")  # a sort of workflows, not of runs
        assert [e.parameter for e in bad.value.errors] == ["sort"]

        exported = await api.export_workflow(wf.id, version=1)
        assert isinstance(exported, ry.WorkflowExport) and exported.format == "railyard/workflow"
        assert exported.workflow.name == "Client searched" and exported.source is not None
        assert exported.source.version == 1
        assert [n["id"] for n in exported.diagram["nodes"]] == ["start", "double"]
        copy = await api.import_workflow(exported, name="Client copy")
        assert isinstance(copy, ry.Imported) and copy.name == "Client copy" and copy.id != wf.id
        assert copy.url.startswith("http") and copy.diagnostics == []
        as_read = msgspec.json.decode(msgspec.json.encode(exported))  # e.g. from a file
        into = await api.import_into_draft(copy.id, as_read, base_revision=copy.revision)
        assert into.id == copy.id and into.revision > copy.revision
        with pytest.raises(ry.Conflict):
            await api.import_into_draft(copy.id, exported, base_revision=copy.revision)
        assert (await api.get_workflow(copy.id)).draft == (await api.get_workflow(wf.id)).draft


async def test_the_blocking_client_logs_in_and_follows_a_run(served: tuple[str, str]) -> None:
    base, _ = served

    def scenario() -> None:
        with ry.Client(base) as api:
            with pytest.raises(ry.Unauthorized):
                api.get_run(str(uuid.uuid4()))
            api.login(EMAIL, PASSWORD)  # a session: the CSRF header goes along
            wf = api.create_workflow("Blocking client")
            assert api.save_draft(wf.id, CHAIN).ok
            api.publish(wf.id)
            started = api.start_run(wf.id, {"n": 5}, idempotency_key="blocking-5")
            statuses = [e.run.status for e in api.run_events(started.id)]
            assert statuses[-1] == "succeeded", statuses
            assert api.wait_for_run(started.id).output == {"n": 10}
            assert [r.id for r in api.iter_runs(workflow_id=wf.id)] == [started.id]
            raw = api.get(f"/api/v1/workflows/{wf.id}")  # the raw escape hatch
            assert raw.status_code == 200 and raw.json()["id"] == wf.id
            token = api.create_token("from a session", scopes=["read"])
            assert token.token
        with ry.Client(base, token=token.token) as reader:
            assert reader.get_workflow(wf.id).name == "Blocking client"
            with pytest.raises(ry.Forbidden):
                reader.start_run(wf.id)

    await asyncio.to_thread(scenario)
