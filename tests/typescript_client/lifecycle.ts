// A workflow's lifecycle written against the TypeScript client that @hey-api/openapi-ts
// generates from Railyard's /api/v1 document into ./client:
// tests/integration/test_generated_typescript_client.py generates it beside this file and
// type-checks both with tsc (strict), so an operation, parameter or model the lifecycle
// needs cannot disappear or change type unnoticed.
import { client } from "./client/client.gen";
import {
  createWorkflow,
  exportWorkflow,
  importWorkflow,
  listRuns,
  publishWorkflow,
  saveDraft,
  search,
  startRun,
  streamRunEvents,
} from "./client/sdk.gen";
import type {
  Diagram,
  Problem,
  RunList,
  RunSummary,
  RunUpdateEvent,
} from "./client/types.gen";

const ENDED = new Set(["succeeded", "failed", "cancelled", "timed_out"]);

/** Create, save a draft, publish, start a run (idempotently), follow it to its end, page
 * through the workflow's runs, search, export and import; the ended run's status. */
export async function lifecycle(baseUrl: string, token: string): Promise<string> {
  client.setConfig({ baseUrl, auth: token });
  const ok = { throwOnError: true } as const;
  const { data: workflow } = await createWorkflow({ ...ok, body: { name: "TypeScript client" } });
  const diagram: Diagram = {
    nodes: [
      { id: "start", type: "trigger.manual" },
      { id: "s", type: "control.set", config: { mapping: { n: "=1" } } },
    ],
    edges: [{ id: "e1", source: "start", target: "s" }],
  };
  const { data: saved } = await saveDraft({
    ...ok,
    path: { workflow_id: workflow.id },
    body: { diagram },
  });
  if (!saved.ok) throw new Error(`draft has errors: ${JSON.stringify(saved.diagnostics)}`);
  await publishWorkflow({ ...ok, path: { workflow_id: workflow.id }, body: { note: "first" } });

  const { data: run } = await startRun({
    ...ok,
    path: { workflow_id: workflow.id },
    body: { input: { n: 1 } },
    headers: { "Idempotency-Key": "order-1" },
  });
  let status = run.status;
  const { stream } = await streamRunEvents({ path: { run_id: run.id } });
  // each event's `data` is parsed JSON: the run (RunUpdateEvent["data"])
  for await (const data of stream) {
    status = (data as unknown as RunUpdateEvent["data"]).status;
    if (ENDED.has(status)) break;
  }

  const runs: RunSummary[] = [];
  let cursor: string | null = null;
  do {
    const { data: page }: { data: RunList } = await listRuns({
      ...ok,
      query: { workflow_id: workflow.id, limit: 2, cursor },
    });
    runs.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor !== null);

  const { data: hits } = await search({ ...ok, query: { q: "TypeScript client" } });
  const { data: exported } = await exportWorkflow({ ...ok, path: { workflow_id: workflow.id } });
  const imported = await importWorkflow({
    body: exported,
    query: { name: "TypeScript client (copy)" },
    throwOnError: false,
  });
  if (imported.error !== undefined) {
    const problem: Problem = imported.error;
    throw new Error(`${problem.status} ${problem.detail}`);
  }
  console.log(runs.length, hits.total, imported.data.id);
  return status;
}
