import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { TOKEN_A, writeTokens } from "../support/auth-setup.ts";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { snapshotFiles, spawnEvidence } from "../support/leftovers.ts";
import { mutate, seededRng } from "../support/train-mutations.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

const SEED = 0x10ca1;
const RUNS = 300;
const HEADERS = { authorization: `Bearer ${TOKEN_A}`, "content-type": "application/json" };

const tree = makeHostTree();
let worker: WorkerProcess;

beforeAll(async () => {
  const tokenFile = writeTokens(join(tree.root, "etc"), [TOKEN_A]);
  worker = await startWorker(tree.writeConfig(`${SIMULATE_TABLES(0.01)}[auth]\ntoken_file = ${JSON.stringify(tokenFile)}\n`), { command: [ensureBinary()] });
});

afterAll(async () => {
  await worker[Symbol.asyncDispose]();
  tree[Symbol.dispose]();
});

describe("fuzzing POST /train on the compiled binary", () => {
  test(`${RUNS} mutated valid bodies (seed ${SEED}) get a 4xx each, never a 5xx, and nothing is spawned`, async () => {
    const rng = seededRng(SEED);
    const before = snapshotFiles(tree);
    const unexpected: string[] = [];
    for (let i = 0; i < RUNS; i++) {
      const { text, mutations } = mutate(tree.validRequest(), rng);
      const res = await worker.request("/train", { method: "POST", headers: HEADERS, body: Buffer.from(text) });
      const body = (await res.json()) as { detail?: unknown };
      if (![400, 413, 422].includes(res.status) || body.detail === undefined) unexpected.push(`#${i} ${mutations.join(",")} → ${res.status} ${JSON.stringify(body)} for ${text.slice(0, 300)}`);
    }
    expect(unexpected).toEqual([]);
    expect(spawnEvidence(tree, worker.proc.pid)).toEqual({ jobRows: 0, jobDirs: [], processes: [] });
    expect(snapshotFiles(tree)).toEqual(before);
    expect(worker.output()).not.toContain("unhandled error");
    expect((await worker.json("/healthz")).status).toBe(200);
  });

  test("the unmutated body is accepted, so the fuzz run's refusals come from its mutations", async () => {
    const res = await worker.request("/train", { method: "POST", headers: HEADERS, body: JSON.stringify(tree.validRequest()) });
    expect(res.status).toBe(200);
    const { worker_job_id } = (await res.json()) as { worker_job_id: string };
    await worker.request(`/train/${worker_job_id}/cancel`, { method: "POST", headers: HEADERS });
  });
});
