import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { incompleteState } from "../../src/supervisor/checkpoints.ts";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { ensureBinary } from "../support/binary.ts";
import { FAILING_TABLES, type HostTree, makeHostTree, SIMULATE_TABLES, outDir } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { mountTmpfs, tmpfsUnavailable } from "../support/small-tmpfs.ts";
import { loraBytes, runPeakBytes, TIERS } from "../../src/tiers.ts";
import { ENDED_STATUSES, isFastStateStep, replacedAtStep } from "../support/jobs.ts";

// Issue 16 through the compiled binary and its simulated trainer, which saves states and resumes as sd-scripts
// does: a fast run (400 steps) saves a state every 40 steps. The default tree's dataset is 3 images x 2 repeats,
// 6 batches an epoch, so every state lies past the first epoch, where sd-scripts' own resume goes wrong.
setDefaultTimeout(90_000);

const TERMINAL = ENDED_STATUSES;

const noTmpfs = tmpfsUnavailable();
const SMALL_FS_BYTES = 64 * 1024 * 1024;

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const sha256 = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");
// Where the trainer writes: the job's private run directory.
const runDir = (tree: HostTree, id: string) => join(tree.state, "jobs", id, "run");
const post = (worker: WorkerProcess, path: string) => worker.json(path, { method: "POST" });

async function untilEnded(worker: WorkerProcess, id: string, seen: number[] = []) {
  return waitFor(async () => {
    const { body } = await worker.json(`/train/${id}`);
    seen.push(body.step);
    return TERMINAL.includes(body.status) ? body : null;
  }, `job ${id} to end`, 60_000);
}

function query<T>(tree: HostTree, sql: string, ...params: string[]): T {
  const db = new Database(join(tree.state, "jobs.db"), { readonly: true });
  try {
    return db.query<T, string[]>(sql).get(...params)!;
  } finally {
    db.close();
  }
}
const jobCount = (tree: HostTree) => query<{ n: number }>(tree, "SELECT count(*) AS n FROM jobs").n;
const trainerPid = (tree: HostTree, id: string) => query<{ pid: number }>(tree, "SELECT pid FROM jobs WHERE id = ?", id).pid;

describe("checkpoints, pause and resume (compiled binary, simulated trainer)", () => {
  test("a run that fails cuda_oom after its first state resumes from it, never below it, to a verified LoRA", async () => {
    using tree = makeHostTree();
    let failed: any;
    {
      await using worker = await startWorker(tree.writeConfig(FAILING_TABLES(0.002, "oom@50")), { command: [binary] });
      const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      failed = await untilEnded(worker, id);
    }
    const state = join(runDir(tree, failed.worker_job_id), "mylora-step00000040-state");
    const intermediate = join(runDir(tree, failed.worker_job_id), "mylora-step00000040.safetensors");
    expect(failed).toMatchObject({ status: "failed", error_code: "cuda_oom", resume_step: 40, resumable: true, paused: false });
    const url = `/train/${failed.worker_job_id}/checkpoints/40`;
    expect(failed.checkpoints).toEqual([{ step: 40, sha256: sha256(intermediate), bytes: readFileSync(intermediate).length, url }]);
    expect(await incompleteState(state, 40)).toBeNull();
    // Nothing but the final LoRA ever lands in the output dir, which the failed run never reached.
    expect(existsSync(outDir(tree))).toBe(false);

    // The same worker without the failure plan: the GPU's co-tenant has gone.
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    // The intermediate LoRA is served from the run directory, as verified; a step not listed is a 404.
    const served = await worker.request(url);
    expect(served.status).toBe(200);
    expect(served.headers.get("x-lora-sha256")).toBe(failed.checkpoints[0].sha256);
    expect(new Bun.CryptoHasher("sha256").update(await served.arrayBuffer()).digest("hex")).toBe(failed.checkpoints[0].sha256);
    expect((await worker.request(`/train/${failed.worker_job_id}/checkpoints/80`)).status).toBe(404);
    const resumed = await post(worker, `/train/${failed.worker_job_id}/resume`);
    expect(resumed).toEqual({ status: 200, body: { worker_job_id: expect.any(String), status: "starting", resumed_from: failed.worker_job_id, resume_step: 40 } });
    const id = resumed.body.worker_job_id;
    const seen: number[] = [];
    const final = await untilEnded(worker, id, seen);
    expect(final).toMatchObject({ status: "succeeded", step: 400, total_steps: 400, resumed_from: failed.worker_job_id, resumed_from_step: 40 });
    expect(Math.min(...seen)).toBe(40);
    expect(final.lora_sha256).toBe(sha256(final.lora_path));
    const lora = await verifySafetensors(final.lora_path);
    expect(lora.ok && lora.value.metadata.ss_steps).toBe("400");
    // The bar counted the 360 steps after the state, from 0; a bar of sd-scripts' past-the-first-epoch resume
    // (global_step restarted at 40 mod 6) would have counted 396 and never been taken as progress.
    const log = readFileSync(join(tree.state, "jobs", id, "train.log"), "utf8");
    expect(log).toContain("skipping 40 steps");
    expect(log).toMatch(/steps: 100%.* 360\/360 /);
    expect(readFileSync(join(tree.state, "jobs", id, "dataset.toml"), "utf8")).toContain(`num_repeats = ${2 * Math.ceil(400 / 6)}`);
    // The loss curve goes on from the state: no point at or below it comes from the resumed run.
    const curve = (await worker.json(`/train/${id}/metrics?max_points=1000`)).body;
    expect(curve.points[0][0]).toBe(41);

    // After success the states and intermediates are gone; the final LoRA stays.
    expect(readdirSync(outDir(tree))).toEqual(["mylora.safetensors"]);
    expect(final).toMatchObject({ resume_step: null, resumable: false, checkpoints: [] });
    expect(final.resume_gone).toContain("removed");
    // The state it resumed from went once the resumed run verified a newer one of its own.
    const predecessor = (await worker.json(`/train/${failed.worker_job_id}`)).body;
    expect(predecessor).toMatchObject({ resumed_by: id, resumable: false, resume_step: null });
    // The first state of its own the worker verified: step 80, or a later one when a loaded host read late.
    expect(isFastStateStep(replacedAtStep(predecessor.resume_gone, id), 40)).toBe(true);
    expect(existsSync(state)).toBe(false);
    const again = await post(worker, `/train/${failed.worker_job_id}/resume`);
    expect(again).toMatchObject({ status: 409, body: { reason: "not_resumable", detail: expect.stringContaining(`already resumed by job ${id}`) } });
  });

  test("pause stops a running job right after its next saved state; resume finishes it", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 3, "a few steps");
    const paused = await post(worker, `/train/${id}/pause`);
    expect(paused).toMatchObject({ status: 200, body: { status: "cancelled", paused: true, resume_step: 40, resumable: true, signal: "SIGTERM" } });
    expect(paused.body.pause_requested_at).toEqual(expect.any(String));
    // Stopped at the state boundary: the run got no further than the state's step and a redraw.
    expect(paused.body.step).toBeGreaterThanOrEqual(40);
    expect(paused.body.step).toBeLessThan(80);
    expect(await incompleteState(join(runDir(tree, id), "mylora-step00000040-state"), 40)).toBeNull();
    expect(liveGroupMembers(trainerPid(tree, id))).toEqual([]);
    // Pausing an ended job changes nothing.
    expect((await post(worker, `/train/${id}/pause`)).body).toEqual(paused.body);

    const next = (await post(worker, `/train/${id}/resume`)).body.worker_job_id;
    // A retry of the resume while the new job runs is that job.
    expect((await post(worker, `/train/${id}/resume`)).body.worker_job_id).toBe(next);
    const seen: number[] = [];
    expect(await untilEnded(worker, next, seen)).toMatchObject({ status: "succeeded", step: 400 });
    expect(Math.min(...seen)).toBe(40);
  });

  test("a pause after the run's last resumable state lets it finish: the state at its last step is not a pause point", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.02)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    // Past the state at 360 and after it was verified (a state still being verified when the pause comes is the one
    // the run pauses at).
    await waitFor(async () => {
      const { body } = await worker.json(`/train/${id}`);
      return body.step > 362 && body.resume_step === 360;
    }, "the steps after the last state before the end");
    const paused = await post(worker, `/train/${id}/pause`);
    expect(paused).toMatchObject({ status: 200, body: { status: "succeeded", paused: false, step: 400, resume_step: null } });
    expect(paused.body.lora_sha256).toBe(sha256(paused.body.lora_path));
  });

  test("a job with no state, a running job and an unknown job are refused with the reason, and nothing is started", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.05)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 1, "a step");
    const running = await post(worker, `/train/${id}/resume`);
    expect(running).toMatchObject({ status: 409, body: { reason: "not_resumable", detail: expect.stringContaining("it is still training; pause it first") } });
    const cancelled = (await post(worker, `/train/${id}/cancel`)).body;
    expect(cancelled).toMatchObject({ status: "cancelled", resume_step: null, resumable: false, paused: false });
    const jobs = jobCount(tree);
    const dirs = readdirSync(join(tree.state, "jobs")).length;
    const refused = await post(worker, `/train/${id}/resume`);
    expect(refused).toEqual({ status: 409, body: { reason: "not_resumable", detail: `job ${id} cannot be resumed: it saved no state before it ended (a fast run saves one every 40 steps)` } });
    expect(jobCount(tree)).toBe(jobs);
    expect(readdirSync(join(tree.state, "jobs")).length).toBe(dirs);
    expect((await post(worker, "/train/00000000-0000-4000-8000-000000000000/resume")).status).toBe(404);
  });

  test("a worker killed with -9 during a resumed run re-adopts it: it ends verified, never below its state", async () => {
    using tree = makeHostTree();
    let predecessor: string;
    {
      await using worker = await startWorker(tree.writeConfig(FAILING_TABLES(0.002, "oom@45")), { command: [binary] });
      predecessor = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      expect(await untilEnded(worker, predecessor)).toMatchObject({ error_code: "cuda_oom", resume_step: 40 });
    }
    const config = tree.writeConfig(SIMULATE_TABLES(0.01));
    let id: string;
    {
      await using worker = await startWorker(config, { command: [binary] });
      id = (await post(worker, `/train/${predecessor}/resume`)).body.worker_job_id;
      await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 45, "the resumed run to step");
    }
    await using restarted = await startWorker(config, { command: [binary] });
    expect(restarted.output()).toContain('"msg":"re-adopting job after restart"');
    const seen: number[] = [];
    const final = await untilEnded(restarted, id, seen);
    expect(final).toMatchObject({ status: "succeeded", step: 400, total_steps: 400, resumed_from: predecessor });
    expect(Math.min(...seen)).toBeGreaterThanOrEqual(40);
    expect(final.lora_sha256).toBe(sha256(final.lora_path));
    expect(existsSync(join(runDir(tree, predecessor), "mylora-step00000040-state"))).toBe(false);
  });

  test.skipIf(noTmpfs !== null)("an output filesystem that cannot hold the final LoRA is 409 insufficient_disk; nothing is created", async () => {
    using tree = makeHostTree();
    const small = join(tree.handoff, "small");
    mkdirSync(small);
    await using _fs = await mountTmpfs(small, SMALL_FS_BYTES);
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.05)), { command: [binary] });
    const refused = await worker.postTrain(tree.validRequest({ output_dir: join(small, "out") }));
    expect(refused).toEqual({
      status: 409,
      body: {
        reason: "insufficient_disk", filesystem: "output_dir", output_dir: join(small, "out"), free_bytes: SMALL_FS_BYTES, needed_bytes: loraBytes(TIERS.fast),
        detail: `the filesystem of ${join(small, "out")} has 0.06 GiB free; this run needs 0.08 GiB for its final LoRA`,
      },
    });
    expect(jobCount(tree)).toBe(0);
    expect(existsSync(join(small, "out"))).toBe(false);
    expect(existsSync(join(tree.state, "jobs")) ? readdirSync(join(tree.state, "jobs")) : []).toEqual([]);
    // Contrast: the same request with its output on the roomy filesystem starts.
    expect((await worker.postTrain(tree.validRequest())).status).toBe(200);
  });

  test.skipIf(noTmpfs !== null)("a state dir that cannot hold the dataset copy and the run directory is 409 insufficient_disk before a byte is copied", async () => {
    using tree = makeHostTree();
    await using _fs = await mountTmpfs(tree.state, SMALL_FS_BYTES);
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.05)), { command: [binary] });
    const refused = await worker.postTrain(tree.validRequest());
    const datasetBytes = readdirSync(tree.dataset, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).reduce((sum, e) => sum + readFileSync(join(e.parentPath, e.name)).length, 0);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ reason: "insufficient_disk", filesystem: "state_dir", needed_bytes: datasetBytes + runPeakBytes(TIERS.fast) });
    expect(refused.body.detail).toStartWith("the worker's state dir has 0.06 GiB free; this run needs 0.64 GiB for its dataset copy");
    expect(refused.body.detail).not.toContain(tree.state);
    expect(jobCount(tree)).toBe(0);
    expect(existsSync(join(tree.state, "jobs")) ? readdirSync(join(tree.state, "jobs")) : []).toEqual([]);
  });

  test("a new run of the same output leaves a resumable job alone; while it runs the resume is 409 output_in_use, once it published 409 output_exists", async () => {
    using tree = makeHostTree();
    let first: string;
    {
      await using worker = await startWorker(tree.writeConfig(FAILING_TABLES(0.002, "oom@50")), { command: [binary] });
      first = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      expect(await untilEnded(worker, first)).toMatchObject({ resumable: true, resume_step: 40 });
    }
    const state = join(runDir(tree, first), "mylora-step00000040-state");
    await using slow = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const second = (await slow.postTrain(tree.validRequest({ seed: 7 }))).body.worker_job_id;
    expect((await slow.json(`/train/${first}`)).body).toMatchObject({ resumable: true, resume_step: 40 });
    expect(await incompleteState(state, 40)).toBeNull();
    const inUse = await post(slow, `/train/${first}/resume`);
    expect(inUse).toEqual({ status: 409, body: { reason: "output_in_use", active_job_id: second, detail: `job ${second} is active and will publish mylora.safetensors into the same output_dir; one output, one run` } });
    expect(await untilEnded(slow, second)).toMatchObject({ status: "succeeded" });
    expect((await post(slow, `/train/${first}/resume`)).body).toMatchObject({ reason: "output_exists" });
    // Its state is still there, whole: nothing of a later run touched it.
    expect(await incompleteState(state, 40)).toBeNull();
  });
});
