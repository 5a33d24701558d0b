import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { ensureBinary } from "../support/binary.ts";
import { processesMarkedWith } from "../support/job-processes.ts";
import { SIMULATE_TABLES, makeHostTree } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";
import { ENDED_STATUSES } from "../support/jobs.ts";

setDefaultTimeout(120_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

async function refusal(configPath: string): Promise<{ code: number; stderr: string }> {
  const proc = Bun.spawn([binary, "serve", "--config", configPath], { stdout: "ignore", stderr: "pipe", env: { PATH: process.env.PATH! } });
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  return { code, stderr };
}

describe("one instance, one truth", () => {
  test("a second worker on the same state_dir refuses to start and names the first", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.01));
    await using first = await startWorker(config, { command: [binary] });
    const second = await refusal(config);
    expect(second.code).not.toBe(0);
    expect(second.stderr).toContain(`another lora-worker (pid ${first.proc.pid}) already uses ${tree.state}`);
  });

  test("contrast: after the first is killed with -9, its stale lock does not stop a new worker", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.01));
    {
      await using _first = await startWorker(config, { command: [binary] });
    }
    await using second = await startWorker(config, { command: [binary] });
    expect((await second.json("/healthz")).status).toBe(200);
  });

  test("a damaged job database refuses to start with a clear message", async () => {
    using tree = makeHostTree();
    writeFileSync(join(tree.state, "jobs.db"), "this is not a database, it is a text file of some length ".repeat(100));
    const { code, stderr } = await refusal(tree.writeConfig(SIMULATE_TABLES(0.01)));
    expect(code).not.toBe(0);
    expect(stderr).toContain(`the job database ${join(tree.state, "jobs.db")} is damaged`);
  });
});

describe("kill -9 at any moment", () => {
  // Each round kills the worker at a different point of a job's life; the next start must settle it.
  // (A kill while the dataset is copied, before any process exists, is test/binary/preparing.test.ts's.)
  const moments: Array<[string, (get: () => Promise<any>, id: string) => Promise<unknown>]> = [
    ["right after the launch", async (_, id) => processesMarkedWith(id).length > 0],
    ["while the trainer is silent", async (get, id) => processesMarkedWith(id).length > 0 && ["starting", "training"].includes((await get()).status)],
    ["mid-training", async (get) => (await get()).step >= 20],
    ["near the end", async (get) => (await get()).step >= 180],
    ["after the end", async (get) => !["starting", "training"].includes((await get()).status)],
  ];

  test("every job ends in exactly one terminal state, and a succeeded one has a verified LoRA", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.005));
    const ids: string[] = [];
    for (const [i, [, moment]] of moments.entries()) {
      await using worker = await startWorker(config, { command: [binary] });
      await waitFor(async () => (await worker.json("/healthz")).body.active_job_id === null, "the previous job to settle", 60_000);
      const posted = await worker.postTrain(tree.validRequest({ output_name: `round${i}` }));
      expect(posted.status).toBe(200);
      const id = posted.body.worker_job_id;
      ids.push(id);
      await waitFor(() => moment(async () => (await worker.json(`/train/${id}`)).body, id), `moment ${i}`, 60_000);
    }
    await using last = await startWorker(config, { command: [binary] });
    await waitFor(async () => (await last.json("/healthz")).body.active_job_id === null, "the last job to settle", 60_000);

    using db = new Database(join(tree.state, "jobs.db"), { readonly: true });
    expect(db.query<{ quick_check: string }, []>("PRAGMA quick_check").get()!.quick_check).toBe("ok");
    const rows = db.query<{ id: string; status: string; ended_at: string | null; lora_path: string | null; lora_sha256: string | null; pid: number | null }, []>("SELECT id, status, ended_at, lora_path, lora_sha256, pid FROM jobs ORDER BY created_at").all();
    expect(rows.map((r) => r.id)).toEqual(ids);
    for (const row of rows) {
      expect(ENDED_STATUSES).toContain(row.status);
      expect(row.ended_at).not.toBeNull();
      if (row.pid !== null) expect(liveGroupMembers(row.pid)).toEqual([]);
      if (row.status === "succeeded") {
        expect(new Bun.CryptoHasher("sha256").update(readFileSync(row.lora_path!)).digest("hex")).toBe(row.lora_sha256!);
      }
    }
    expect(rows.map((r) => r.status)).toEqual(ids.map(() => "succeeded"));
  });
});
