import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { readProcStat } from "../../src/os/proc.ts";
import { ensureBinary } from "../support/binary.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { killAll, markedInTree, rewriteJob, storedJob } from "../support/crash-state.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

setDefaultTimeout(120_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

const GRACE_S = 3;

// A 400-step simulated run of 40 s: long enough to crash the worker in the middle of it.
function slowConfig(tree: HostTree, simulate = ""): string {
  return tree.writeConfig(
    `[trainer]\nmode = "simulate"\ncancel_grace_seconds = ${GRACE_S}\n[simulate]\nseconds_per_step = 0.1\n${simulate}[gpu]\nnvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}\nadmission = "off"\n`,
  );
}

// Whatever a failed test leaves running is killed before the tree is removed.
function scratch(): HostTree {
  const tree = makeHostTree();
  const dispose = tree[Symbol.dispose];
  tree[Symbol.dispose] = () => {
    killAll([...markedInTree(tree).values()].flat());
    dispose();
  };
  return tree;
}

async function trainingJob(worker: WorkerProcess, tree: HostTree, name: string): Promise<string> {
  const posted = await worker.postTrain(tree.validRequest({ output_name: name }));
  expect(posted.status).toBe(200);
  const id: string = posted.body.worker_job_id;
  await waitFor(async () => (await worker.json(`/train/${id}`)).body.step >= 2, "the job to be training");
  return id;
}

async function crash(worker: WorkerProcess): Promise<void> {
  worker.proc.kill("SIGKILL");
  await worker.proc.exited;
}

// The invariant: exactly one trainer tree for the live job, every process of it the shim or in the trainer's
// group, the worker following it, and no second train admitted while it lives.
async function expectOneSupervisedTree(tree: HostTree, worker: WorkerProcess, id: string): Promise<void> {
  const row = await waitFor(() => {
    const r = storedJob(tree, id);
    return r?.shim_pid !== null && r?.pid !== null ? r : null;
  }, "the shim and trainer on record");
  expect([...markedInTree(tree).keys()]).toEqual([id]);
  for (const pid of markedInTree(tree).get(id)!) expect(pid === row!.shim_pid || readProcStat(pid)?.pgrp === row!.pid).toBe(true);
  expect((await worker.json("/healthz")).body.active_job_id).toBe(id);
  expect(["starting", "training"]).toContain((await worker.json(`/train/${id}`)).body.status);
  const second = await worker.postTrain(tree.validRequest({ output_name: "second", seed: 7 }));
  expect(second).toMatchObject({ status: 409, body: { reason: "busy", active_job_id: id } });
}

async function cancelCleanly(worker: WorkerProcess, tree: HostTree, id: string): Promise<void> {
  const cancelled = await worker.json(`/train/${id}/cancel`, { method: "POST" });
  expect(cancelled.body.status).toBe("cancelled");
  expect(markedInTree(tree).size).toBe(0);
}

describe("a worker killed between spawning the shim and recording it", () => {
  for (const [name, lostFiles] of [
    ["re-adopts the shim and trainer its job files name", [] as string[]],
    ["re-adopts them by the job marker when even the job files are gone", ["shim.json", "trainer.json"]],
  ] as const) {
    test(name, async () => {
      using tree = scratch();
      const config = slowConfig(tree);
      const first = await startWorker(config, { command: [binary] });
      const id = await trainingJob(first, tree, "window");
      await crash(first);
      // What the few milliseconds between spawn and record leave: a claimed row that names no process.
      rewriteJob(tree, id, "status = 'starting', shim_pid = NULL, shim_start_ticks = NULL, pid = NULL, pid_start_ticks = NULL, boot_id = NULL, started_at = NULL");
      for (const file of lostFiles) rmSync(join(tree.state, "jobs", id, file));
      // Contrast: right now the trainer runs with nobody supervising it.
      expect(markedInTree(tree).get(id)?.length).toBeGreaterThanOrEqual(2);

      await using second = await startWorker(config, { command: [binary] });

      await expectOneSupervisedTree(tree, second, id);
      await cancelCleanly(second, tree, id);
    });
  }
});

describe("a cancel interrupted by a restart", () => {
  test("is carried through by the next worker, its grace counted from when the stop was recorded", async () => {
    using tree = scratch();
    const config = slowConfig(tree, `fail = "ignore-sigterm"\n`);
    const first = await startWorker(config, { command: [binary] });
    const id = await trainingJob(first, tree, "interrupted");
    void first.request(`/train/${id}/cancel`, { method: "POST" }).catch(() => undefined);
    await waitFor(() => storedJob(tree, id)?.stop_reason === "cancel", "the stop to be recorded");
    await crash(first);
    // Contrast: the trainer ignores SIGTERM, so without the rest of the stop it trains on.
    expect(markedInTree(tree).get(id)?.length).toBeGreaterThanOrEqual(2);

    await using second = await startWorker(config, { command: [binary] });
    const final = await waitFor(async () => {
      const body = (await second.json(`/train/${id}`)).body;
      return ["starting", "training"].includes(body.status) ? null : body;
    }, "the interrupted cancel to end", 30_000);

    expect(final).toMatchObject({ status: "cancelled", forced_kill: true });
    const row = storedJob(tree, id)!;
    const stopTook = Date.parse(row.ended_at!) - Date.parse(row.stop_requested_at!);
    expect(stopTook).toBeGreaterThanOrEqual(GRACE_S * 1000 - 50);
    expect(stopTook).toBeLessThan(GRACE_S * 1000 + 10_000);
    expect(markedInTree(tree).size).toBe(0);
  });
});

describe("a job database lost while a training runs", () => {
  test("the next worker records the live job again from its job directory and supervises it", async () => {
    using tree = scratch();
    const config = slowConfig(tree);
    const first = await startWorker(config, { command: [binary] });
    const request = tree.validRequest({ output_name: "orphaned" });
    const posted = await first.postTrain(request);
    const id: string = posted.body.worker_job_id;
    await waitFor(async () => (await first.json(`/train/${id}`)).body.step >= 2, "the job to be training");
    await crash(first);
    // What the worker's own refusal message suggests for a damaged database: move it aside.
    for (const name of readdirSync(tree.state).filter((n) => n.startsWith("jobs.db"))) renameSync(join(tree.state, name), join(tree.root, name));

    await using second = await startWorker(config, { command: [binary] });

    const job = await second.json(`/train/${id}`);
    expect(job).toMatchObject({ status: 200, body: { worker_job_id: id, request } });
    await expectOneSupervisedTree(tree, second, id);
    await cancelCleanly(second, tree, id);
  });

  test("processes of a job whose record is already final are stopped, and no train starts until they are gone", async () => {
    using tree = scratch();
    const config = slowConfig(tree, `fail = "ignore-sigterm"\n`);
    const first = await startWorker(config, { command: [binary] });
    const id = await trainingJob(first, tree, "finished-on-record");
    await crash(first);
    rewriteJob(tree, id, "status = 'failed', error_code = 'worker_restarted', ended_at = created_at");
    expect(markedInTree(tree).get(id)?.length).toBeGreaterThanOrEqual(2);

    await using second = await startWorker(config, { command: [binary] });
    const refused = await second.postTrain(tree.validRequest({ output_name: "next" }));
    await waitFor(() => markedInTree(tree).size === 0, "the leftovers to be stopped");
    const admitted = await second.postTrain(tree.validRequest({ output_name: "after" }));

    // Refused only while the leftovers lived (the sweep gives SIGTERM-proof processes 2 s).
    expect(refused).toMatchObject({ status: 409, body: { reason: "busy", active_job_id: id } });
    expect(admitted.status).toBe(200);
    await cancelCleanly(second, tree, admitted.body.worker_job_id);
  });
});

// Runs `during` with strace attached to the worker's main thread (where its JavaScript runs, and so every file it
// opens and every process it starts), and detached after.
async function traced<T>(pid: number, args: string[], during: () => Promise<T>): Promise<T> {
  const strace = Bun.spawn(["strace", "-p", String(pid), ...args], { stdout: "ignore", stderr: "pipe" });
  const reader = strace.stderr.getReader();
  for (let seen = ""; !seen.includes("attached"); ) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`strace did not attach: ${seen}`);
    seen += new TextDecoder().decode(value);
  }
  try {
    return await during();
  } finally {
    strace.kill("SIGINT");
    await strace.exited;
  }
}

describe("a launch that fails after the shim started", () => {
  test("stops whatever it started, records spawn_failed and says so, and the worker lives on", async () => {
    using tree = scratch();
    await using worker = await startWorker(slowConfig(tree), { command: [binary] });
    await worker.json("/healthz");
    // The launch follows the answer: the request's traced window lasts until the job trains or has ended.
    const post = async (name: string) => {
      const answer = await worker.postTrain(tree.validRequest({ output_name: name }));
      const id = answer.body.worker_job_id;
      const launched = await waitFor(async () => {
        const { body } = await worker.json(`/train/${id}`);
        return body.status !== "starting" ? body : null;
      }, "the launch");
      return { answer, launched };
    };
    // Contrast, and the map of a launch: where the worker starts the shim, and the database's fsyncs around it
    // (the claim before, the shim's record after).
    const trace = join(tree.root, "launch.trace");
    const first = await traced(worker.proc.pid, ["-e", "trace=vfork,clone,clone3,fsync,fdatasync", "-o", trace], () => post("traced"));
    expect(first.answer.status).toBe(200);
    await cancelCleanly(worker, tree, first.answer.body.worker_job_id);
    const calls = readFileSync(trace, "utf8").split("\n").filter((l) => /^(vfork|clone|clone3|fsync|fdatasync)\(/.test(l));
    const spawnAt = calls.findLastIndex((l) => !l.startsWith("f"));
    const syncsBefore = calls.slice(0, spawnAt).filter((l) => l.startsWith("f")).length;
    expect(spawnAt).toBeGreaterThan(0);
    expect(calls.slice(spawnAt + 1).some((l) => l.startsWith("fsync("))).toBe(true);

    // The same launch again, its first fsync after the shim started refused by the disk (EIO). The request was
    // accepted; the job records why it never ran.
    const inject = `inject=fsync:error=EIO:when=${syncsBefore + 1}`;
    const { answer, launched } = await traced(worker.proc.pid, ["-e", "trace=fsync", "-e", inject, "-o", "/dev/null"], () => post("eio"));
    expect(worker.proc.exitCode).toBeNull();
    expect(answer.status).toBe(200);
    expect(launched).toMatchObject({ status: "failed", error_code: "spawn_failed" });
    expect(launched.error).toContain("after the trainer's shim had started");
    expect(launched.error).toContain("I/O error");
    expect(storedJob(tree, answer.body.worker_job_id)).toMatchObject({ status: "failed", error_code: "spawn_failed" });
    expect(markedInTree(tree).size).toBe(0);

    // Contrast: untraced, the same worker launches normally.
    const last = await post("after");
    expect(last.launched).toMatchObject({ status: "training" });
    await cancelCleanly(worker, tree, last.answer.body.worker_job_id);
  });
});
