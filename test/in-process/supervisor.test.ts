import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LineSplitter } from "../../src/progress/tracker.ts";
import { applyLine, initialProgress } from "../../src/progress/progress.ts";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { readProcStat } from "../../src/os/proc.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { dispatchOk, realModeConfig, replayTrainer, supervisorFor, TRAINERS } from "../support/real-mode.ts";
import { waitFor } from "../support/wait.ts";

// Real processes on a shared 2-core machine: generous bounds, conditions waited on, never slept.
setDefaultTimeout(30_000);

async function runToEnd(trainer: string) {
  using tree = makeHostTree();
  const config = realModeConfig(tree, trainer);
  await using s = supervisorFor(tree, config, [trainer]);
  const job = await dispatchOk(s, tree.validRequest());
  await s.supervisor.untilIdle();
  return s.store.get(job.id)!;
}

describe("supervisor outcomes", () => {
  test("exit 0 without the LoRA file is failed/output_missing, never succeeded", async () => {
    const row = await runToEnd(join(TRAINERS, "exit-zero-without-file.sh"));
    expect(row).toMatchObject({ status: "failed", error_code: "output_missing", exit_code: 0, lora_sha256: null });
  });

  test("exit 0 with a truncated safetensors file is failed/output_invalid", async () => {
    const row = await runToEnd(join(TRAINERS, "truncated-lora.sh"));
    expect(row).toMatchObject({ status: "failed", error_code: "output_invalid", exit_code: 0 });
    expect(row.error).toContain("is not a valid safetensors file");
  });

  const realLogs: Array<[string, number, string]> = [
    ["sdscripts-oom-2.log", 1, "cuda_oom"],
    ["sdscripts-nodata-2.log", 0, "dataset_empty"],
    ["sdscripts-accelerate-1.log", 1, "trainer_crashed"],
  ];
  for (const [log, code, errorCode] of realLogs) {
    test(`the real log ${log} with exit ${code} is classified ${errorCode}`, async () => {
      using tree = makeHostTree();
      const trainer = replayTrainer(tree, log, code);
      await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
      const job = await dispatchOk(s, tree.validRequest());
      await s.supervisor.untilIdle();
      const row = s.store.get(job.id)!;
      expect(row).toMatchObject({ status: "failed", error_code: errorCode, exit_code: code });
      expect(row.error).toContain(`exit code ${code}`);
    });
  }

  test("the loss history keeps one point per step, the last redraw's loss winning, nan as null", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "five-steps.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    await s.supervisor.untilIdle();
    expect(s.store.lossHistory(job.id)).toEqual([[1, 0.5], [2, 0.4], [3, 0.3], [4, null], [5, 0.2]]);
    expect(s.store.get(job.id)).toMatchObject({ step: 5, total_steps: 400, loss: 0.2 });
  });

  test("the step on screen is the step reported: the last redraw counts before the next one starts", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "holds-last-bar.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    const progress = await waitFor(() => {
      const p = s.supervisor.fresh((live) => live(job.id));
      return p && p.step === 3 ? p : null;
    }, "step 3, which no later \r ever closes");
    expect(progress).toMatchObject({ step: 3, total_steps: 400, loss: 0.3 });
  });

  test("an answer reads what the trainer wrote since the last look, so it shows the step just written", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "holds-last-bar.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    const log = s.store.get(job.id)!.log_path;
    await waitFor(() => existsSync(log) && readFileSync(log, "utf8").includes("3/400"), "the trainer's third step");
    // Contrast: nobody follows the job, so until an answer asks, its output waits for the next tick (seconds away):
    // nothing of it is on record yet.
    expect(s.store.get(job.id)!.status).toBe("starting");
    expect(s.supervisor.fresh((live) => live(job.id))).toMatchObject({ step: 3, total_steps: 400, loss: 0.3 });
    expect(s.store.get(job.id)!.status).toBe("training");
  });

  test("a job with a watcher is read at the watched pace: it sees the steps as they come, not all at once", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "step-a-tenth.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    const seen = new Set<number>();
    const unwatch = s.supervisor.watch(job.id, () => seen.add(s.supervisor.fresh((live) => live(job.id))?.step ?? 0));
    await waitFor(() => seen.has(20), "step 20 through the watcher");
    unwatch();
    // Twenty steps over two seconds: read every 100 ms, the watcher sees most of them one by one (a loaded host
    // may merge some); read every few seconds (the pace of a job nobody follows), it sees three at most.
    expect(seen.size).toBeGreaterThanOrEqual(6);
  });

  test("contrast: a job nobody watches or asks about is read at its own slow pace, many steps at a time", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "step-a-tenth.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    const seen = new Set<number>();
    // Looked at on record, which asks nothing of the run (its progress() would read the log now).
    await waitFor(() => seen.add(s.store.get(job.id)!.step).has(20), "step 20 at a tick");
    expect(seen.size).toBeLessThanOrEqual(3);
  });

  test("contrast: folding only the records a \\r or \\n has closed leaves the last redraw unread", () => {
    const bars = [1, 2, 3].map((n) => `\rsteps:  ${n}%|#         | ${n}/100 [00:0${n}<01:40,  1.00s/it, avr_loss=0.${n}]`).join("");
    const progress = new LineSplitter().push(bars).reduce(applyLine, initialProgress());
    expect(progress.step).toBe(2);
  });

  test("a spawn that fails is recorded as spawn_failed and frees the slot", async () => {
    using tree = makeHostTree();
    const missing = join(tree.root, "no-such-accelerate");
    const config = realModeConfig(tree, join(TRAINERS, "exit-zero-without-file.sh"));
    await using s = supervisorFor(tree, config, [missing]);
    const job = await dispatchOk(s, tree.validRequest());
    await s.supervisor.untilIdle();
    expect(s.store.get(job.id)).toMatchObject({ status: "failed", error_code: "spawn_failed", pid: null });
    expect(s.store.get(job.id)!.error).toContain("no-such-accelerate");
    expect(s.store.activeJobs()).toEqual([]);
    // A job that never trained keeps no dataset copy.
    expect(existsSync(join(tree.state, "jobs", job.id, "dataset"))).toBe(false);
  });

  test("contrast: a trainer that started and failed leaves its job its dataset copy", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "exit-zero-without-file.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    await s.supervisor.untilIdle();
    expect(s.store.get(job.id)).toMatchObject({ status: "failed", error_code: "output_missing" });
    expect(existsSync(join(tree.state, "jobs", job.id, "dataset"))).toBe(true);
  });
});

describe("cancel", () => {
  test("cancel kills the whole tree, SIGTERM-ignoring grandchild included, and says force was needed", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "stubborn-tree.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    const pgid = await waitFor(() => s.store.get(job.id)!.pid, "the shim to start the trainer");
    // The child and the grandchild say their names once they ignore SIGTERM. Counting the group's members instead
    // counts their sleeps too, and a cancel on a loaded host could then come before a trap is set and need no force.
    const log = join(tree.state, "jobs", job.id, "train.log");
    const said = (name: string) => existsSync(log) && new RegExp(`^${name} \\d+$`, "m").test(readFileSync(log, "utf8"));
    await waitFor(() => ["leader", "child", "grandchild"].every(said), "leader, child and grandchild to ignore SIGTERM");
    const members = liveGroupMembers(pgid);

    const final = await s.supervisor.cancel(job.id);

    expect(final).toMatchObject({ status: "cancelled", forced_kill: true, error_code: null });
    expect(final!.cancel_requested_at).not.toBeNull();
    expect(members.filter((pid) => readProcStat(pid) !== null && readProcStat(pid)!.state !== "Z")).toEqual([]);
    expect(existsSync(join(tree.handoff, "job1", "out", "mylora.safetensors"))).toBe(false);
  });

  test("contrast: killing only the leader leaves the SIGTERM-ignoring children running", async () => {
    const proc = Bun.spawn([join(TRAINERS, "stubborn-tree.sh")], { detached: true, stdout: "ignore" });
    try {
      await waitFor(() => liveGroupMembers(proc.pid).length >= 3, "the tree to start");
      proc.kill("SIGKILL");
      await proc.exited;
      expect(liveGroupMembers(proc.pid).length).toBeGreaterThanOrEqual(2);
    } finally {
      process.kill(-proc.pid, "SIGKILL");
    }
  });

  test("cancel on a terminal job is idempotent and changes nothing", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "exit-zero-without-file.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    await s.supervisor.untilIdle();
    const before = s.store.get(job.id);
    expect(await s.supervisor.cancel(job.id)).toEqual(before);
    expect(await s.supervisor.cancel(job.id)).toEqual(before);
  });
});
