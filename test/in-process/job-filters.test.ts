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
  const [resumedPause, paused, cancelled] = await run({ seconds_per_step: 0.05 }, async (a) => {
    const earlier = await dispatch(a, tree, "resumed-pause");
    expect((await a.json(`/train/${earlier}/pause`, { method: "POST" })).body).toMatchObject({ paused: true });
    const first = await dispatch(a, tree, "paused");
    expect((await a.json(`/train/${first}/pause`, { method: "POST" })).body).toMatchObject({ paused: true, resumable: true });
    const second = await dispatch(a, tree, "cancelled");
    expect((await a.json(`/train/${second}/cancel`, { method: "POST" })).body).toMatchObject({ status: "cancelled", paused: false, resumable: false });
    return `${earlier} ${first} ${second}`;
  }).then((ids) => ids.split(" "));
  // The earlier pause is resumed, and its chain goes on to the end: it is paused no longer.
  const successor = await run({ seconds_per_step: 0 }, async (a) => {
    const next = (await a.json(`/train/${resumedPause}/resume`, { method: "POST" })).body.worker_job_id as string;
    expect(await ended(a, next)).toMatchObject({ status: "succeeded", resumed_from: resumedPause });
    expect((await a.json(`/train/${resumedPause}`)).body).toMatchObject({ status: "cancelled", paused: false, resumable: false, resumed_by: next });
    return next;
  });
  return { failedWithState, failedBare, resumedPause: resumedPause!, paused: paused!, cancelled: cancelled!, successor };
}

describe("the job list filtered by paused and resumable", () => {
  test("paused keeps the paused job not resumed yet, resumable the jobs a resume would take; cancelled keeps all three cancelled ones", async () => {
    using tree = makeHostTree();
    const jobs = await history(tree);
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
    const ids = async (status: string) => (await a.json(`/train?status=${status}`)).body.jobs.map((j: any) => j.worker_job_id);
    expect(await ids("paused")).toEqual([jobs.paused]);
    expect(await ids("resumable")).toEqual([jobs.paused, jobs.failedWithState]);
    // Contrast: the plain status filter cannot tell them apart.
    expect(await ids("cancelled")).toEqual([jobs.cancelled, jobs.paused, jobs.resumedPause]);
    expect(await ids("succeeded")).toEqual([jobs.successor]);
    expect(await ids("failed")).toEqual([jobs.failedBare, jobs.failedWithState]);
    const bad = await a.json("/train?status=stopped");
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].msg).toContain("paused, resumable");

    // lora-worker jobs takes the same filters; a paused job's status reads paused, a resumed one's resumed.
    using server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: a.app.fetch });
    const cli = async (...args: string[]) => {
      const proc = Bun.spawn([process.execPath, MAIN, "jobs", "--url", server.url.origin, ...args], {
        stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! },
      });
      const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
      const [header, ...lines] = out.trimEnd().split("\n");
      expect(header).toMatch(/^ID +STATUS +STEPS +LOSS +TIER@DEVICE +CREATED +OUTPUT( +ERROR)?$/);
      return { code, lines };
    };
    const resumable = await cli("--status", "resumable");
    expect(resumable.code).toBe(0);
    expect(resumable.lines.map((l) => l.split(/\s+/).slice(0, 2))).toEqual([[jobs.paused, "paused"], [jobs.failedWithState, "failed"]]);
    const paused = await cli("--status", "paused");
    expect(paused.lines.map((l) => l.split(/\s+/).slice(0, 2))).toEqual([[jobs.paused, "paused"]]);
    const cancelled = await cli("--status", "cancelled");
    expect(cancelled.lines.map((l) => l.split(/\s+/).slice(0, 2))).toEqual([
      [jobs.cancelled, "cancelled"], [jobs.paused, "paused"], [jobs.resumedPause, "resumed"],
    ]);
  }, TIMEOUT_MS);
});
