import { Database } from "bun:sqlite";
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readTrainer } from "../../src/job-dir/job-dir.ts";
import { ensureBinary } from "../support/binary.ts";
import { SIMULATE_TABLES, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { isLive, processesMarkedWith } from "../support/job-processes.ts";
import { type SlurmCluster, slurmUnavailable, startSlurmCluster } from "../support/slurm-cluster.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";
import { chromiumForTests } from "../support/chromium.ts";
import { openStatusPage, saveScreenshot } from "../support/status-page.ts";
import { untilEnded as ended } from "../support/jobs.ts";

// Issue 17: the compiled worker with trainer.backend = "slurm" against a real single-node Slurm cluster with two
// fake GPUs, started once for this file. The simulated trainer runs inside the batch jobs, through the shim.
setDefaultTimeout(120_000);

const unavailable = slurmUnavailable();

let binary: string;
let cluster: SlurmCluster;
beforeAll(async () => {
  if (unavailable !== null) return;
  binary = ensureBinary();
  cluster = await startSlurmCluster({ gpus: 2 });
}, 180_000);
afterAll(async () => {
  await cluster?.[Symbol.asyncDispose]();
});
// A test that failed midway leaves its batch jobs running: they must not hold the GPUs of the next.
afterEach(async () => {
  if (unavailable !== null) return;
  cluster.run(["scancel", `--partition=${cluster.partition}`]);
  await waitFor(() => cluster.run(["squeue", "--noheader"]).stdout.trim() === "", "the cluster's queue to empty", 30_000);
});

interface SlurmConfigOptions {
  secondsPerStep: number;
  maxActive?: number;
  fail?: string;
  backend?: "local";
  mem?: string;
}

function slurmConfig(tree: HostTree, opts: SlurmConfigOptions): string {
  const tables = SIMULATE_TABLES(opts.secondsPerStep)
    .replace('mode = "simulate"', `mode = "simulate"\nbackend = "${opts.backend ?? "slurm"}"`)
    .replace("[gpu]", `${opts.fail === undefined ? "" : `fail = ${JSON.stringify(opts.fail)}\n`}[gpu]`);
  const mem = opts.mem === undefined ? "" : `mem = ${JSON.stringify(opts.mem)}\n`;
  const slurm = `[slurm]\nmax_active_jobs = ${opts.maxActive ?? 1}\npartition = ${JSON.stringify(cluster.partition)}\n` +
    `poll_seconds = 0.2\n${mem}`;
  const devices = `[[devices]]\nindex = 0\nname = "fake GPU"\nclass = "24gb"\ngres = "gpu:1"\n`;
  return tree.writeConfig(`${tables}${slurm}${devices}`);
}

const untilEnded = (worker: WorkerProcess, id: string) => ended(worker, id, 90_000);

// The GPUs Slurm gave the run, as its trainer sees them (the node is this host).
function trainerGpus(tree: HostTree, id: string): string | undefined {
  const trainer = readTrainer(join(tree.state, "jobs", id));
  if (trainer === null) return undefined;
  const environ = readFileSync(`/proc/${trainer.pid}/environ`, "utf8").split("\0");
  return environ.find((v) => v.startsWith("CUDA_VISIBLE_DEVICES="))?.slice("CUDA_VISIBLE_DEVICES=".length);
}

// A job training on Slurm, and its Slurm id; the worker that dispatched it stops on the way out.
async function trainingOnSlurm(tree: HostTree, config: string): Promise<{ id: string; slurmJobId: string }> {
  await using worker = await startWorker(config, { command: [binary], env: cluster.env });
  const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
  const slurmJobId = await waitFor(async () => {
    const { body } = await worker.json(`/train/${id}`);
    return body.step > 5 ? (body.slurm_job_id as string) : null;
  }, "training to start");
  return { id, slurmJobId };
}

// A job training on Slurm whose worker stopped, and whose record then lost its Slurm id.
async function trainingThenForgotten(tree: HostTree, config: string): Promise<{ id: string; slurmJobId: string }> {
  const { id, slurmJobId } = await trainingOnSlurm(tree, config);
  // The worker has stopped: nothing writes the record behind the test's back.
  const db = new Database(join(tree.state, "jobs.db"));
  db.run("UPDATE jobs SET slurm_job_id = NULL WHERE id = ?", [id]);
  db.close();
  return { id, slurmJobId };
}

describe.skipIf(unavailable !== null)("the Slurm backend (compiled binary, single-node cluster)", () => {
  const browser = chromiumForTests();

  test("a run is a batch job that trains to a verified LoRA; /healthz names the backend, /gpu-status the cluster's GPUs", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.005 }), { command: [binary], env: cluster.env });
    expect((await worker.json("/healthz")).body).toMatchObject({ backend: "slurm", max_active_jobs: 1 });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const final = await untilEnded(worker, id);
    const slurmJobId: string = final.slurm_job_id;
    expect(slurmJobId).toMatch(/^\d+$/);
    expect(final).toMatchObject({ status: "succeeded", step: 400, total_steps: 400 });
    expect(final.lora_sha256).toBe(new Bun.CryptoHasher("sha256").update(readFileSync(final.lora_path)).digest("hex"));
    expect(cluster.jobState(slurmJobId)).toMatchObject({ JobState: "COMPLETED", JobName: `lora-worker-${id}` });
    expect((await worker.json(`/train/${id}/metrics`)).body).toMatchObject({ total_points: 400 });
    const launch = JSON.parse(readFileSync(join(tree.state, "jobs", id, "launch.json"), "utf8"));
    expect(launch.env.CUDA_VISIBLE_DEVICES).toBeUndefined();
    const gpus = (await worker.json("/gpu-status")).body;
    expect(gpus).toMatchObject({ backend: "slurm", nodes: [{ name: cluster.nodeName, gpus: [{ type: "a6000", total: 2, allocated: 0 }] }] });
    // The status page draws the cluster's nodes, not a probe failure.
    const page = await openStatusPage(browser, worker);
    await page.until(`document.getElementById("gpus").textContent.includes("a6000: 0 of 2 allocated")`, "the cluster's GPUs on the page");
    expect(await page.evaluate(`document.getElementById("gpus").textContent`)).toContain(cluster.nodeName);
    await page.until(`document.getElementById("loss-curve").dataset.points === "400"`, "the loss curve");
    await saveScreenshot(page, "slurm-gpus");
  });

  test("doctor checks the cluster: the controller answers and offers every device's gres, or names the one it lacks", async () => {
    using tree = makeHostTree();
    const doctor = (config: string) => {
      const res = Bun.spawnSync([binary, "doctor", "--config", config], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...cluster.env } });
      return res.stdout.toString().split("\n").find((line) => line.includes(" slurm: ")) ?? res.stdout.toString();
    };
    expect(doctor(slurmConfig(tree, { secondsPerStep: 0.05 }))).toMatch(/^OK {3}slurm: the controller answers and offers every device's gres; state_dir, .* must be at the same paths on every node/);
    const config = slurmConfig(tree, { secondsPerStep: 0.05 });
    writeFileSync(config, readFileSync(config, "utf8").replace('gres = "gpu:1"', 'gres = "gpu:h100:1"'));
    expect(doctor(config)).toMatch(/^FAIL slurm: device 0 asks for gpu:h100:1, which no node offers/);
  });

  test("two runs at once get distinct GPUs from Slurm; a third past max_active_jobs is refused busy", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05, maxActive: 2 }), { command: [binary], env: cluster.env });
    const a = (await worker.postTrain(tree.validRequest({ output_name: "a" }))).body.worker_job_id;
    const b = (await worker.postTrain(tree.validRequest({ output_name: "b" }))).body.worker_job_id;
    const third = await worker.postTrain(tree.validRequest({ output_name: "c" }));
    expect(third).toMatchObject({ status: 409, body: { reason: "busy", detail: expect.stringContaining("slurm.max_active_jobs") } });
    const [ga, gb] = await waitFor(() => {
      const seen = [trainerGpus(tree, a), trainerGpus(tree, b)];
      return seen.every((g) => g !== undefined) ? seen : null;
    }, "both trainers to run");
    expect(ga).not.toBe(gb);
    expect((await worker.json("/gpu-status")).body.nodes[0].gpus).toEqual([{ type: "a6000", total: 2, allocated: 2 }]);
    expect((await worker.json("/healthz")).body.active_job_ids.sort()).toEqual([a, b].sort());
    // Each active job has its own progress series.
    const metrics = await (await worker.request("/metrics")).text();
    for (const id of [a, b]) expect(metrics).toMatch(new RegExp(`^lora_worker_active_job_step\\{job_id="${id}"\\} \\d+$`, "m"));
    for (const id of [a, b]) expect((await worker.json(`/train/${id}/cancel`, { method: "POST" })).body.status).toBe("cancelled");
  });

  test("a run Slurm holds pending is starting, phase queued, with Slurm's reason; it runs once a GPU frees", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05, maxActive: 3 }), { command: [binary], env: cluster.env });
    const running = [0, 1].map(async (i) => (await worker.postTrain(tree.validRequest({ output_name: `r${i}` }))).body.worker_job_id);
    const [r0, r1] = await Promise.all(running);
    // Both GPUs taken: the third waits for Resources (while the first two still wait too, Slurm says Priority).
    for (const id of [r0, r1]) await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 0, "both runs to train");
    const waiting = (await worker.postTrain(tree.validRequest({ output_name: "w" }))).body.worker_job_id;
    const queued = await waitFor(async () => {
      const { body } = await worker.json(`/train/${waiting}`);
      // Until the scheduler has looked at it, Slurm's reason is None.
      return body.phase === "queued" && body.queue_reason !== "None" ? body : null;
    }, "the third run to be queued with a reason");
    expect(queued).toMatchObject({ status: "starting", phase: "queued", queue_reason: "Resources" });
    // The page says why it waits.
    const page = await openStatusPage(browser, worker);
    await page.evaluate(`focus(${JSON.stringify(waiting)})`);
    await page.until(`document.getElementById("job-meta").textContent.includes("waiting in Slurm's queue: Resources")`, "the queue reason on the page");
    expect(await page.evaluate(`document.getElementById("job-phase").textContent`)).toBe("queued");
    await worker.json(`/train/${r0}/cancel`, { method: "POST" });
    await waitFor(async () => (await worker.json(`/train/${waiting}`)).body.step > 0, "the queued run to train once a GPU freed");
    for (const id of [r1, waiting]) await worker.json(`/train/${id}/cancel`, { method: "POST" });
  });

  test("cancel of a tree that ignores SIGTERM and has a setsid grandchild leaves nothing", async () => {
    using tree = makeHostTree();
    const config = slurmConfig(tree, { secondsPerStep: 0.05, fail: "ignore-sigterm,setsid-orphan@2" });
    await using worker = await startWorker(config, { command: [binary], env: cluster.env });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 3, "the stray to be spawned");
    expect(processesMarkedWith(id).length).toBeGreaterThan(2);
    const cancelled = (await worker.json(`/train/${id}/cancel`, { method: "POST" })).body;
    expect(cancelled).toMatchObject({ status: "cancelled", forced_kill: true });
    expect(processesMarkedWith(id).filter(isLive)).toEqual([]);
    expect(cluster.jobState(cancelled.slurm_job_id).JobState).not.toMatch(/RUNNING|PENDING|COMPLETING/);
  });

  test("a worker killed with -9 mid-run re-adopts its batch job by slurm_job_id", async () => {
    using tree = makeHostTree();
    const config = slurmConfig(tree, { secondsPerStep: 0.005 });
    let id: string;
    {
      await using worker = await startWorker(config, { command: [binary], env: cluster.env });
      id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 5, "training to start");
    }
    await using restarted = await startWorker(config, { command: [binary], env: cluster.env });
    expect(restarted.output()).toContain('"msg":"re-adopting job after restart"');
    const final = await untilEnded(restarted, id);
    expect(final).toMatchObject({ status: "succeeded", step: 400 });
  });

  test("after a switch to the local backend, a run Slurm holds is still Slurm's: adopted through it, and new runs wait", async () => {
    using tree = makeHostTree();
    let id: string;
    {
      await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05 }), { command: [binary], env: cluster.env });
      id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 5, "training to start");
    }
    await using local = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05, backend: "local" }), { command: [binary], env: cluster.env });
    const { body: adopted } = await local.json(`/train/${id}`);
    const slurmJobId: string = adopted.slurm_job_id;
    expect(adopted.status).toBe("training");
    expect(slurmJobId).toMatch(/^\d+$/);
    // Followed, not lost: its steps keep coming in through the shared job directory.
    await waitFor(async () => (await local.json(`/train/${id}`)).body.step > adopted.step, "the adopted run to go on");
    const refused = await local.postTrain(tree.validRequest({ output_name: "local" }));
    expect(refused).toMatchObject({ status: 409, body: { reason: "busy", active_job_id: id } });
    const cancelled = await local.json(`/train/${id}/cancel`, { method: "POST" });
    expect(cancelled.body.status).toBe("cancelled");
    // Ended in Slurm too (the shim's batch script exits once its trainer has: COMPLETED, or CANCELLED after a kill).
    expect(["COMPLETED", "CANCELLED"]).toContain(cluster.jobState(slurmJobId).JobState!);
    expect(processesMarkedWith(id)).toEqual([]);
  });

  test("after a switch to the Slurm backend, a run on this host is still this host's, adopted and finished here", async () => {
    using tree = makeHostTree();
    let id: string;
    {
      const config = slurmConfig(tree, { secondsPerStep: 0.01, backend: "local" });
      await using worker = await startWorker(config, { command: [binary], env: cluster.env });
      id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 5, "training to start");
    }
    await using onSlurm = await startWorker(slurmConfig(tree, { secondsPerStep: 0.01 }), { command: [binary], env: cluster.env });
    expect(onSlurm.output()).toContain('"msg":"re-adopting job after restart"');
    const final = await untilEnded(onSlurm, id);
    expect(final).toMatchObject({ status: "succeeded", step: 400 });
    expect(final.slurm_job_id).toBeUndefined();
    expect(cluster.run(["squeue", "--noheader"]).stdout.trim()).toBe("");
  });

  test("a job whose Slurm id never reached the record (a crash right after sbatch) is found again by its name", async () => {
    using tree = makeHostTree();
    const config = slurmConfig(tree, { secondsPerStep: 0.005 });
    const { id, slurmJobId } = await trainingThenForgotten(tree, config);
    // Nor the state the backend handed back: the worker had recorded only that Slurm places the run.
    writeFileSync(join(tree.state, "jobs", id, "placement.json"), JSON.stringify({ backend: "slurm", state: null }));
    await using restarted = await startWorker(config, { command: [binary], env: cluster.env });
    const final = await untilEnded(restarted, id);
    expect(final).toMatchObject({ status: "succeeded", step: 400, slurm_job_id: slurmJobId });
  });

  test("a job whose Slurm id the record lost but its job directory kept is adopted by that id, and recorded again", async () => {
    using tree = makeHostTree();
    const config = slurmConfig(tree, { secondsPerStep: 0.005 });
    const { id, slurmJobId } = await trainingThenForgotten(tree, config);
    // Contrast with the crash right after sbatch: placement.json still holds the state Slurm's backend handed back.
    expect(JSON.parse(readFileSync(join(tree.state, "jobs", id, "placement.json"), "utf8"))).toEqual({
      backend: "slurm", state: { slurm_job_id: slurmJobId },
    });
    await using restarted = await startWorker(config, { command: [binary], env: cluster.env });
    const final = await untilEnded(restarted, id);
    expect(final).toMatchObject({ status: "succeeded", step: 400, slurm_job_id: slurmJobId });
  });

  test("a run Slurm kills for memory (OUT_OF_MEMORY, past slurm.mem as sbatch --mem) is host_oom_killed", async () => {
    using tree = makeHostTree();
    // 8 MiB: less than the shim and the trainer need (~17 MiB here); the cluster's default (1 GiB) runs the others.
    await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05, mem: "8M" }), { command: [binary], env: cluster.env });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const final = await untilEnded(worker, id);
    expect(final).toMatchObject({ status: "failed", error_code: "host_oom_killed" });
    expect(final.error).toContain("OUT_OF_MEMORY");
    expect(cluster.jobState(final.slurm_job_id)).toMatchObject({ JobState: "OUT_OF_MEMORY", MinMemoryNode: "8M" });
  });

  test("a run cancelled in Slurm from outside the worker fails and says so", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05 }), { command: [binary], env: cluster.env });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    const slurmJobId = await waitFor(async () => {
      const { body } = await worker.json(`/train/${id}`);
      return body.step > 2 ? body.slurm_job_id : null;
    }, "training to start");
    expect(cluster.run(["scancel", slurmJobId]).exitCode).toBe(0);
    const final = await untilEnded(worker, id);
    expect(final).toMatchObject({ status: "failed", error_code: "trainer_crashed", error: expect.stringContaining("cancelled outside the worker") });
  });

  test("Slurm's TIMEOUT is the job's timeout", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05 }), { command: [binary], env: cluster.env });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 2, "training to start");
    const slurmJobId = (await worker.json(`/train/${id}`)).body.slurm_job_id;
    await cluster.expireTimeLimit(slurmJobId);
    const final = await untilEnded(worker, id);
    expect(final).toMatchObject({ status: "failed", error_code: "timeout", error: expect.stringContaining("time limit") });
  });

  test("a run Slurm would refuse (an unknown partition) is 503 slurm_refused with Slurm's words, and nothing is created", async () => {
    using tree = makeHostTree();
    const config = slurmConfig(tree, { secondsPerStep: 0.05 });
    writeFileSync(config, readFileSync(config, "utf8").replace(`partition = ${JSON.stringify(cluster.partition)}`, 'partition = "nowhere"'));
    await using worker = await startWorker(config, { command: [binary], env: cluster.env });
    const refused = await worker.postTrain(tree.validRequest());
    expect(refused).toMatchObject({ status: 503, body: { reason: "slurm_refused", detail: expect.stringContaining("Invalid partition name specified") } });
    expect((await worker.json("/train")).body.jobs).toEqual([]);
    expect(existsSync(join(tree.state, "jobs")) ? readdirSync(join(tree.state, "jobs")) : []).toEqual([]);
    expect(cluster.run(["squeue", "--noheader"]).stdout.trim()).toBe("");
  });

  // Last: it takes the node down and back up.
  test("the node failing under a run is node_failed", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(slurmConfig(tree, { secondsPerStep: 0.05 }), { command: [binary], env: cluster.env });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 2, "training to start");
    try {
      expect(cluster.run(["scontrol", "update", `NodeName=${cluster.nodeName}`, "State=DOWN", "Reason=test"]).exitCode).toBe(0);
      const final = await untilEnded(worker, id);
      expect(final).toMatchObject({ status: "failed", error_code: "node_failed", error: expect.stringContaining("NODE_FAIL") });
    } finally {
      cluster.run(["scontrol", "update", `NodeName=${cluster.nodeName}`, "State=RESUME"]);
    }
  });
});
