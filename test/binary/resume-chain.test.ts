import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { type HostTree, makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { isFastStateStep, untilEnded } from "../support/jobs.ts";
import { slowCalls } from "../support/slow-reads.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

// Issue 35, §3, through the compiled binary: a resume of a paused job that ends before its trainer starts (cancelled,
// or its worker killed, while it links its predecessor's dataset copy) takes nothing from the chain: its predecessor stays the job
// to resume, and it keeps no copy. The links are held in the middle by strace delaying each link() of one image.
setDefaultTimeout(120_000);

const LINK_DELAY_MS = 400;

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const jobDir = (tree: HostTree, id: string) => join(tree.state, "jobs", id);
// The image of the predecessor's copy whose link is held.
const heldImage = (tree: HostTree, id: string) => join(jobDir(tree, id), "dataset", "images", "img0.png");
const post = (worker: WorkerProcess, path: string) => worker.json(path, { method: "POST" });

// A job paused at a saved state, resumable: its id and that state's step. The pause is asked before the first state
// (step 40); a loaded host may stop at a later one (isFastStateStep says why).
type Paused = { id: string; step: number };
async function pausedAtState(worker: WorkerProcess, tree: HostTree): Promise<Paused> {
  const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
  const paused = (await post(worker, `/train/${id}/pause`)).body;
  expect(paused).toMatchObject({ status: "cancelled", paused: true, resumable: true });
  expect(isFastStateStep(paused.resume_step)).toBe(true);
  return { id, step: paused.resume_step };
}

// The predecessor is the job to resume again; the successor that never trained says so, and holds nothing.
async function expectChainHandedBack(worker: WorkerProcess, tree: HostTree, { id: first, step }: Paused, successor: string) {
  const after = (await worker.json(`/train/${successor}`)).body;
  expect(after).toMatchObject({ resumed_from: first, resumable: false });
  expect(after.resume_step ?? null).toBeNull();
  expect(existsSync(join(jobDir(tree, successor), "dataset"))).toBe(false);
  const refused = await post(worker, `/train/${successor}/resume`);
  expect(refused.status).toBe(409);
  expect(refused.body.reason).toBe("not_resumable");
  expect(refused.body.detail).toContain(`resume job ${first}`);
  expect((await worker.json(`/train/${first}`)).body).toMatchObject({ resumable: true, resume_step: step });
  const again = await post(worker, `/train/${first}/resume`);
  expect(again).toMatchObject({ status: 200, body: { resumed_from: first, resume_step: step } });
  return again.body.worker_job_id as string;
}

describe("a resume chain, when a resume ends before it trains", () => {
  test("cancelled while it links its predecessor's copy, it hands the chain back: the predecessor resumes to the end", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.02)), { command: [binary] });
    const first = await pausedAtState(worker, tree);
    let successor: string;
    {
      await using _slow = await slowCalls(worker.proc.pid, "link", heldImage(tree, first.id), LINK_DELAY_MS);
      const resumed = await post(worker, `/train/${first.id}/resume`);
      expect(resumed).toMatchObject({ status: 200, body: { resumed_from: first.id, resume_step: first.step } });
      successor = resumed.body.worker_job_id;
      const cancelled = await post(worker, `/train/${successor}/cancel`);
      expect(cancelled.body).toMatchObject({ status: "cancelled", phase: "preparing" });
    }
    const next = await expectChainHandedBack(worker, tree, first, successor);

    // Contrast: a resume that trained keeps the chain. Cancelled past its start, it is the one to resume.
    await waitFor(async () => (await worker.json(`/train/${next}`)).body.step >= first.step + 5, "the resumed run to train");
    expect((await post(worker, `/train/${next}/cancel`)).body).toMatchObject({ status: "cancelled", resumable: true });
    const refused = await post(worker, `/train/${first.id}/resume`);
    expect(refused.body).toMatchObject({ reason: "not_resumable" });
    expect(refused.body.detail).toContain(`already resumed by job ${next}`);
    const last = (await post(worker, `/train/${next}/resume`)).body.worker_job_id;
    expect(await untilEnded(worker, last)).toMatchObject({ status: "succeeded", resumed_from: next });
  });

  test("its worker killed -9 while it links, the restart fails it, removes its links and hands the chain back", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.005));
    let first: Paused;
    let successor: string;
    {
      const killed = await startWorker(config, { command: [binary] });
      first = await pausedAtState(killed, tree);
      await using _slow = await slowCalls(killed.proc.pid, "link", heldImage(tree, first.id), LINK_DELAY_MS);
      successor = (await post(killed, `/train/${first.id}/resume`)).body.worker_job_id;
      const links = join(jobDir(tree, successor), "dataset", "images");
      await waitFor(() => existsSync(links), "the links to begin");
      killed.proc.kill("SIGKILL");
      await killed.proc.exited;
      // Contrast: the copy the killed worker was making is there until the restart.
      expect(existsSync(links)).toBe(true);
    }
    await using worker = await startWorker(config, { command: [binary] });
    const failed = (await worker.json(`/train/${successor}`)).body;
    expect(failed).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    expect(failed.error).toEndWith(`nothing was trained: resume job ${first.id} again`);
    const next = await expectChainHandedBack(worker, tree, first, successor);
    expect(await untilEnded(worker, next)).toMatchObject({ status: "succeeded", resumed_from: first.id });
  });
});
