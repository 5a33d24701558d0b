import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { FAILING_TABLES, type HostTree, makeHostTree, SIMULATE_TABLES, sha256, outDir } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { isFastStateStep, replacedAtStep, untilEnded } from "../support/jobs.ts";

// Issue 26, §1 and §2, through the compiled binary and its simulated trainer: the trainer writes into the job's
// private run directory, the worker publishes the verified LoRA into arbo's output_dir, and a resume goes on only
// from a state the worker verified, in its own tree, on the base model the chain started on.
setDefaultTimeout(90_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const runDir = (tree: HostTree, id: string) => join(tree.state, "jobs", id, "run");
const post = (worker: WorkerProcess, path: string) => worker.json(path, { method: "POST" });

// A job that failed at step 50 with its state at step 40, in a worker that is gone again.
async function failedAt40(tree: HostTree): Promise<string> {
  await using worker = await startWorker(tree.writeConfig(FAILING_TABLES(0.002, "oom@50")), { command: [binary] });
  const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
  expect(await untilEnded(worker, id)).toMatchObject({ resumable: true, resume_step: 40 });
  return id;
}

describe("the run directory and the publish", () => {
  test("an output file that appears while the job runs is kept: the job fails publish_failed, nothing else lands", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.005)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 5, "a few steps");
    const theirs = "arbo's own file";
    mkdirSync(outDir(tree), { recursive: true });
    writeFileSync(join(outDir(tree), "mylora.safetensors"), theirs);
    const final = await untilEnded(worker, id);
    expect(final).toMatchObject({ status: "failed", error_code: "publish_failed", exit_code: 0 });
    expect(final.lora_path ?? null).toBeNull();
    expect(final.error).toBe("output_dir/mylora.safetensors appeared while the job ran; it was not replaced, and the LoRA was not published");
    expect(readFileSync(join(outDir(tree), "mylora.safetensors"), "utf8")).toBe(theirs);
    expect(readdirSync(outDir(tree))).toEqual(["mylora.safetensors"]);
    // The trained LoRA is kept in the job's run directory.
    expect(existsSync(join(runDir(tree, id), "mylora.safetensors"))).toBe(true);
  });

  test("a worker killed -9 whose trainer ends while it is down publishes the LoRA when it starts again", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.005));
    let id: string;
    {
      await using worker = await startWorker(config, { command: [binary] });
      id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 5, "a few steps");
    }
    // The shim outlives the worker and records the trainer's end; nothing is published without the worker.
    await waitFor(() => existsSync(join(tree.state, "jobs", id, "exit.json")), "the trainer to end while the worker is down", 30_000);
    expect(existsSync(join(outDir(tree), "mylora.safetensors"))).toBe(false);
    await using restarted = await startWorker(config, { command: [binary] });
    const final = await untilEnded(restarted, id);
    expect(final).toMatchObject({ status: "succeeded", lora_path: join(outDir(tree), "mylora.safetensors") });
    expect(sha256(readFileSync(final.lora_path))).toBe(final.lora_sha256);
    expect(readdirSync(outDir(tree))).toEqual(["mylora.safetensors"]);
  });

  test("samples live in the run directory, never in output_dir; a sample replaced by a link is not followed", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest({ samples: 1 }))).body.worker_job_id;
    const final = await untilEnded(worker, id);
    expect(final.status).toBe("succeeded");
    expect(readdirSync(outDir(tree))).toEqual(["mylora.safetensors"]);
    const [first, second] = final.samples;
    expect((await worker.request(first.url)).status).toBe(200);
    // Contrast: the same listed name, now a link to the worker's database, is a 404 and serves nothing.
    const path = join(runDir(tree, id), "sample", second.name);
    rmSync(path);
    symlinkSync(join(tree.state, "jobs.db"), path);
    const linked = await worker.request(second.url);
    expect(linked.status).toBe(404);
    expect(await linked.text()).not.toContain("SQLite");
  });
});

describe("resume chains", () => {
  test("A paused, B = resume(A) fails before its own first state, C = resume(B) resumes from A's state and succeeds", async () => {
    using tree = makeHostTree();
    const a = await failedAt40(tree);
    const stateA = join(runDir(tree, a), "mylora-step00000040-state");
    let b: string;
    {
      // B fails at step 45 again: before its first own state at 80.
      await using worker = await startWorker(tree.writeConfig(FAILING_TABLES(0.002, "oom@45")), { command: [binary] });
      b = (await post(worker, `/train/${a}/resume`)).body.worker_job_id;
      expect(await untilEnded(worker, b)).toMatchObject({ status: "failed", resumable: true, resume_step: 40 });
      expect(existsSync(stateA)).toBe(true);
      expect((await post(worker, `/train/${a}/resume`)).body).toEqual({ reason: "not_resumable", detail: `job ${a} was already resumed by job ${b}; resume job ${b} instead` });
    }
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    const c = (await post(worker, `/train/${b}/resume`)).body.worker_job_id;
    const final = await untilEnded(worker, c);
    expect(final).toMatchObject({ status: "succeeded", resumed_from: b, resumed_from_step: 40, step: 400 });
    expect(sha256(readFileSync(final.lora_path))).toBe(final.lora_sha256);
    // A's state went once C had a newer one verified (80, or a later one when the worker read several
    // announcements at once); the chain's records say so and point at its newest job.
    expect(existsSync(stateA)).toBe(false);
    const bAfter = (await worker.json(`/train/${b}`)).body;
    expect(bAfter).toMatchObject({ resumed_by: c, resumable: false });
    expect(isFastStateStep(replacedAtStep(bAfter.resume_gone, c), 40)).toBe(true);
    expect((await post(worker, `/train/${a}/resume`)).body.detail).toBe(`job ${a} was already resumed by job ${b}, continued by job ${c}; job ${c} succeeded; there is nothing left to train`);
  });

  test("a state changed after it was verified, one outside the worker's tree, a replaced base model: each 409, nothing starts", async () => {
    using tree = makeHostTree();
    // A whole second, so the contrast can set it back exactly.
    const MODEL_MTIME = 1_700_000_000;
    utimesSync(tree.model, MODEL_MTIME, MODEL_MTIME);
    const id = await failedAt40(tree);
    const state = join(runDir(tree, id), "mylora-step00000040-state");
    const jobs = () => readdirSync(join(tree.state, "jobs")).length;
    const before = jobs();
    // The record's state path, written while no worker runs (a running one keeps the rows it read).
    const recordState = (path: string) => {
      using db = new Database(join(tree.state, "jobs.db"));
      db.run("UPDATE jobs SET resume_state=? WHERE id=?", [path, id]);
    };

    // A record an older version left: its state in the output dir.
    recordState(join(outDir(tree), "mylora-step00000040-state"));
    {
      await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
      expect((await post(worker, `/train/${id}/resume`)).body.detail).toBe(`job ${id} cannot be resumed: its saved state at step 40 lies outside the worker's run directories (an older version saved it into output_dir)`);
    }
    recordState(state);
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });

    // A byte in the middle of the scheduler's archive: still a whole zip by its tail, but not what was verified.
    const scheduler = join(state, "scheduler.bin");
    const original = readFileSync(scheduler);
    const flipped = Buffer.from(original);
    flipped[4] = flipped[4]! ^ 0xff;
    writeFileSync(scheduler, flipped);
    expect((await post(worker, `/train/${id}/resume`)).body).toEqual({ reason: "not_resumable", detail: `job ${id} cannot be resumed: its saved state at step 40 changed after the worker verified it` });
    writeFileSync(scheduler, original);

    // The base model touched since the run started.
    utimesSync(tree.model, MODEL_MTIME, MODEL_MTIME + 5);
    const replaced = await post(worker, `/train/${id}/resume`);
    expect(replaced).toEqual({ status: 409, body: { reason: "base_model_changed", field: "base_model_path", detail: expect.stringContaining("is not the file the run started on (it was modified (its mtime changed))") } });
    utimesSync(tree.model, MODEL_MTIME, MODEL_MTIME);
    expect(jobs()).toBe(before);

    // Contrast: the state and the model as they were resume.
    const resumed = await post(worker, `/train/${id}/resume`);
    expect(resumed.status).toBe(200);
    expect(await untilEnded(worker, resumed.body.worker_job_id)).toMatchObject({ status: "succeeded" });
  });
});

describe("a dispatch cut short", () => {
  test("a job directory no record names and with no job.json (a copy killed midway) is removed at start-up; one with a job.json stays", async () => {
    using tree = makeHostTree();
    const cut = join(tree.state, "jobs", "11111111-1111-4111-8111-111111111111");
    const forgotten = join(tree.state, "jobs", "22222222-2222-4222-8222-222222222222");
    for (const dir of [cut, forgotten]) {
      mkdirSync(join(dir, "dataset", "images"), { recursive: true });
      writeFileSync(join(dir, "dataset", "images", "img0.png"), "half a copy");
    }
    writeFileSync(join(forgotten, "job.json"), JSON.stringify({ id: "22222222-2222-4222-8222-222222222222" }));
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
    expect(existsSync(cut)).toBe(false);
    expect(worker.output()).toContain('"msg":"removed a job directory no record names (a dispatch cut short)"');
    // Contrast: a job a lost database forgot is left for the operator.
    expect(existsSync(join(forgotten, "job.json"))).toBe(true);
  });
});
