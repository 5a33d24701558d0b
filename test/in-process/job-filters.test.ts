import { describe, expect, test } from "bun:test";
import { inProcessApp } from "../support/app-harness.ts";
import { MAIN, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { untilEnded } from "../support/jobs.ts";

// GET /train?status=paused|resumable and `lora-worker jobs --status`: what a person looks for among ended jobs.
const TIMEOUT_MS = 60_000;

type App = ReturnType<typeof inProcessApp>;

async function dispatch(a: App, tree: HostTree, name: string): Promise<string> {
  const body = JSON.stringify(tree.validRequest({ output_name: name }));
  const answer = await a.json("/train", { method: "POST", headers: { "content-type": "application/json" }, body });
  if (answer.status !== 200) throw new Error(`POST /train of ${name} answered ${answer.status}: ${JSON.stringify(answer.body)}`);
  return answer.body.worker_job_id;
}

const ended = (a: App, id: string) => untilEnded(a, id, 15_000);

// One history with each kind of ended job, under a worker of each failure plan in turn (the database stays).
async function history(tree: HostTree) {
  const run = async (simulate: Record<string, unknown>, act: (a: App) => Promise<string>) => {
    await using a = inProcessApp(tree, simulateModeConfig(tree, simulate), SIMULATOR);
    return await act(a);
  };
  const failedWithState = await run({ seconds_per_step: 0, fail: "oom@50" }, async (a) => {
    const id = await dispatch(a, tree, "failed-with-state");
    expect(await ended(a, id)).toMatchObject({ status: "failed", resumable: true, resume_step: 40 });
    return id;
  });
  const failedBare = await run({ seconds_per_step: 0, fail: "oom@3" }, async (a) => {
    const id = await dispatch(a, tree, "failed-bare");
    expect(await ended(a, id)).toMatchObject({ status: "failed", resumable: false });
    return id;
  });
  const [paused, cancelled] = await run({ seconds_per_step: 0.05 }, async (a) => {
    const first = await dispatch(a, tree, "paused");
    expect((await a.json(`/train/${first}/pause`, { method: "POST" })).body).toMatchObject({ paused: true, resumable: true });
    const second = await dispatch(a, tree, "cancelled");
    expect((await a.json(`/train/${second}/cancel`, { method: "POST" })).body).toMatchObject({ status: "cancelled", paused: false, resumable: false });
    return `${first} ${second}`;
  }).then((ids) => ids.split(" "));
  return { failedWithState, failedBare, paused: paused!, cancelled: cancelled! };
}

describe("the job list filtered by paused and resumable", () => {
  test("paused keeps the paused job, resumable the jobs a resume would take; cancelled keeps both cancelled ones", async () => {
    using tree = makeHostTree();
    const jobs = await history(tree);
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
    const ids = async (status: string) => (await a.json(`/train?status=${status}`)).body.jobs.map((j: any) => j.worker_job_id);
    expect(await ids("paused")).toEqual([jobs.paused]);
    expect(await ids("resumable")).toEqual([jobs.paused, jobs.failedWithState]);
    // Contrast: the plain status filter cannot tell them apart.
    expect(await ids("cancelled")).toEqual([jobs.cancelled, jobs.paused]);
    expect(await ids("failed")).toEqual([jobs.failedBare, jobs.failedWithState]);
    const bad = await a.json("/train?status=stopped");
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].msg).toContain("paused, resumable");

    // lora-worker jobs takes the same filters, and a paused job's status reads paused.
    using server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: a.app.fetch });
    const cli = async (...args: string[]) => {
      const proc = Bun.spawn([process.execPath, MAIN, "jobs", "--url", server.url.origin, ...args], {
        stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! },
      });
      const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
      return { code, lines: out.trimEnd().split("\n") };
    };
    const resumable = await cli("--status", "resumable");
    expect(resumable.code).toBe(0);
    expect(resumable.lines.map((l) => l.split(/\s+/).slice(0, 2))).toEqual([[jobs.paused, "paused"], [jobs.failedWithState, "failed"]]);
  }, TIMEOUT_MS);
});
