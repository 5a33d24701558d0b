import { Database } from "bun:sqlite";
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ownMemoryEvents, readOomKills } from "../../src/os/proc.ts";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { ensureBinary } from "../support/binary.ts";
import { SIMULATE_TABLES, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";
import { ENDED_STATUSES } from "../support/jobs.ts";

// Real processes on a shared 2-core machine: generous bounds, conditions waited on, never slept.
setDefaultTimeout(60_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

describe("the compiled binary, simulated trainer", () => {
  test("--version prints the baked-in version and commit", () => {
    const res = Bun.spawnSync([binary, "--version"]);
    expect(res.exitCode).toBe(0);
    expect(res.stdout.toString()).toMatch(/^lora-worker \d+\.\d+\.\d+ \(commit [0-9a-f]{12}(-dirty)?\)\n$/);
  });

  test("a train goes starting → training with step rising → succeeded, and lora_sha256 matches the file", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const health = await worker.json("/healthz");
    expect(health.body).toMatchObject({ trainer_mode: "simulate", simulated: true, active_job_id: null });

    const dispatched = await worker.postTrain(tree.validRequest());
    expect(dispatched).toEqual({ status: 200, body: { worker_job_id: expect.any(String), status: "starting" } });
    const id = dispatched.body.worker_job_id;
    const seen: Array<{ status: string; step: number }> = [];
    const final = await waitFor(async () => {
      const { body } = await worker.json(`/train/${id}`);
      seen.push({ status: body.status, step: body.step });
      return ENDED_STATUSES.includes(body.status) ? body : null;
    }, "the job to end", 30_000);

    expect(final).toMatchObject({ status: "succeeded", phase: "done", step: 400, total_steps: 400, simulated: true, exit_code: 0 });
    const steps = seen.filter((s) => s.status === "training").map((s) => s.step);
    expect(new Set(steps).size).toBeGreaterThan(2);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    const onDisk = new Bun.CryptoHasher("sha256").update(readFileSync(final.lora_path)).digest("hex");
    expect(final.lora_sha256).toBe(onDisk);
    expect(final.lora_path).toBe(join(tree.handoff, "job1", "out", "mylora.safetensors"));
    expect(typeof final.loss).toBe("number");

    const log = await (await worker.request(`/train/${id}/log?lines=3`)).text();
    // sd-scripts never closes its bar: the last redraw lands after "model saved." (see sdscripts-success-1.log).
    // The trainer wrote into the job's private run directory; the output dir received the verified LoRA alone.
    const runFile = join(tree.state, "jobs", id, "run", "mylora.safetensors");
    expect(log.trimEnd().split("\n")).toEqual([`saving checkpoint: ${runFile}`, "model saved.", expect.stringMatching(/^steps: 100%.* 400\/400 /)]);
    expect(readdirSync(join(tree.handoff, "job1", "out"))).toEqual(["mylora.safetensors"]);
    expect(readFileSync(runFile).equals(readFileSync(final.lora_path))).toBe(true);
  });

  test("cancel stops a running simulated train: cancelled, no LoRA, no process left", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.05)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 2, "a few steps");
    const cancelled = await worker.json(`/train/${id}/cancel`, { method: "POST" });
    expect(cancelled).toMatchObject({ status: 200, body: { status: "cancelled", signal: "SIGTERM", forced_kill: false } });
    expect(cancelled.body.lora_path).toBeUndefined();
    expect(await worker.json(`/train/${id}/cancel`, { method: "POST" })).toEqual(cancelled);
    expect((await worker.json("/healthz")).body.active_job_id).toBeNull();
  });

  test("a worker killed with -9 mid-run is re-adopted on restart: progress goes on and the job succeeds with a verified LoRA", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.01));
    let id: string;
    let stepBefore: number;
    {
      await using worker = await startWorker(config, { command: [binary] });
      id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
      stepBefore = await waitFor(async () => {
        const step = (await worker.json(`/train/${id}`)).body.step;
        return step > 5 ? step : 0;
      }, "training to start");
    }
    const trainerPid = jobRow(tree, id).pid;
    expect(liveGroupMembers(trainerPid).length).toBeGreaterThan(0);

    await using restarted = await startWorker(config, { command: [binary] });
    expect(restarted.output()).toContain('"msg":"re-adopting job after restart"');
    const final = await waitFor(async () => {
      const { body } = await restarted.json(`/train/${id}`);
      return body.status === "training" || body.status === "starting" ? null : body;
    }, "the re-adopted job to end", 30_000);
    expect(final).toMatchObject({ status: "succeeded", step: 400, total_steps: 400, exit_code: 0 });
    expect(final.step).toBeGreaterThan(stepBefore);
    expect(final.lora_sha256).toBe(new Bun.CryptoHasher("sha256").update(readFileSync(final.lora_path)).digest("hex"));
    expect(liveGroupMembers(trainerPid)).toEqual([]);
  });

  test("a re-adopted job can still be cancelled, and nothing of it is left", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.05));
    const id = await trainThenKillWorker(config, tree);
    const trainerPid = jobRow(tree, id).pid;
    await using restarted = await startWorker(config, { command: [binary] });
    const cancelled = await restarted.json(`/train/${id}/cancel`, { method: "POST" });
    expect(cancelled.body).toMatchObject({ status: "cancelled", signal: "SIGTERM" });
    expect(liveGroupMembers(trainerPid)).toEqual([]);
  });

  // Where the host counts its OOM kills (cgroup v2, or v1's memory controller), a count that did not rise proves it
  // was not the OOM killer; where it counts none, the SIGKILL alone says host_oom_killed.
  test("a trainer killed with -9 from outside fails with the signal recorded, judged by the host's OOM-kill count", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.05)), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 1, "training to start");
    process.kill(jobRow(tree, id).pid, "SIGKILL");
    const final = await waitFor(async () => {
      const { body } = await worker.json(`/train/${id}`);
      return body.status === "training" ? null : body;
    }, "the job to end");
    const counted = readOomKills(ownMemoryEvents()) !== null;
    expect(final).toMatchObject({ status: "failed", error_code: counted ? "trainer_crashed" : "host_oom_killed", signal: "SIGKILL" });
    expect(final.error).toContain(counted ? "not by the OOM killer" : "evidence: the SIGKILL alone");
  });

  test("a restart that finds neither shim nor trainer alive fails the job as worker_restarted", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.05));
    const id = await trainThenKillWorker(config, tree);
    const row = jobRow(tree, id);
    process.kill(row.shim_pid, "SIGKILL");
    process.kill(-row.pid, "SIGKILL");
    await waitFor(() => liveGroupMembers(row.pid).length === 0 && liveGroupMembers(row.shim_pid).length === 0, "the job's processes to die");
    await using restarted = await startWorker(config, { command: [binary] });
    expect((await restarted.json(`/train/${id}`)).body).toMatchObject({ status: "failed", error_code: "worker_restarted" });
    // A job that trained keeps its dataset copy (a resume reads it); only one that never trained loses it.
    expect(existsSync(join(tree.state, "jobs", id, "dataset", "images"))).toBe(true);
  });
});

// Starts a worker, dispatches a train, and kills the worker with -9 once the trainer is stepping.
async function trainThenKillWorker(config: string, tree: HostTree): Promise<string> {
  await using worker = await startWorker(config, { command: [binary] });
  const id: string = (await worker.postTrain(tree.validRequest())).body.worker_job_id;
  await waitFor(async () => (await worker.json(`/train/${id}`)).body.step > 1, "training to start");
  return id;
}

function jobRow(tree: HostTree, id: string): { pid: number; shim_pid: number } {
  using db = new Database(join(tree.state, "jobs.db"), { readonly: true });
  return db.query<{ pid: number; shim_pid: number }, [string]>("SELECT pid, shim_pid FROM jobs WHERE id = ?").get(id)!;
}
