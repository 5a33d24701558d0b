import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { markedProcessesOf as strayProcesses, readProcStat } from "../../src/os/proc.ts";
import { terminateGroup } from "../../src/os/terminate.ts";
import { killAll } from "../support/crash-state.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { type ConfigOverrides, dispatchOk, realModeConfig, supervisorFor, TRAINERS } from "../support/real-mode.ts";
import { waitFor } from "../support/wait.ts";

setDefaultTimeout(30_000);

async function runWith(script: string, overrides: ConfigOverrides) {
  using tree = makeHostTree();
  const trainer = join(TRAINERS, script);
  await using s = supervisorFor(tree, realModeConfig(tree, trainer, overrides), [trainer]);
  const job = await dispatchOk(s, tree.validRequest());
  await s.supervisor.untilIdle();
  const row = s.store.get(job.id)!;
  return { row, log: readFileSync(row.log_path, "utf8"), logBytes: statSync(row.log_path).size };
}

describe("watchdogs", () => {
  test("a loss that stays nan stops the run early as nan_loss", async () => {
    const { row } = await runWith("nan-forever.sh", { watchdog: { nan_updates: 5 } });
    expect(row).toMatchObject({ status: "failed", error_code: "nan_loss", stop_reason: "nan_loss", signal: "SIGTERM" });
    expect(row.step).toBeLessThan(1000);
  });

  test("a trainer silent for longer than stall_seconds is stopped as stalled", async () => {
    const { row } = await runWith("silent-after-start.sh", { watchdog: { stall_seconds: 0.5 } });
    expect(row).toMatchObject({ status: "failed", error_code: "stalled", stop_reason: "stalled" });
  });

  test("a run past its tier's wall-clock bound is stopped as timeout", async () => {
    const { row } = await runWith("silent-after-start.sh", { watchdog: { tier_timeout_seconds: { fast: 0.5 } } });
    expect(row).toMatchObject({ status: "failed", error_code: "timeout", stop_reason: "timeout" });
  });

  test("contrast: a trainer that keeps talking outlives a short stall limit", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "nan-forever.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer, { watchdog: { stall_seconds: 1, nan_updates: 100_000 } }), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    const step = () => s.supervisor.fresh((live) => live(job.id))?.step ?? 0;
    // Four stall limits of the worker's own clock, with the trainer's steps still coming at the end: bounded by
    // what happened, not by how fast a loaded host draws 10 ms steps.
    const first = await waitFor(() => step(), "the first step", 60_000);
    const since = Date.now();
    await waitFor(() => Date.now() - since > 4_000 && step() > first, "four stall limits of talking", 60_000);
    expect(s.store.get(job.id)).toMatchObject({ status: "training", stop_reason: null });
    await s.supervisor.cancel(job.id);
  });

  test("a flooding trainer cannot grow its log past the cap; head and tail are kept", async () => {
    const { row, log, logBytes } = await runWith("flood.sh", { trainer: { log_max_bytes: 1024 * 1024 } });
    expect(row).toMatchObject({ status: "failed", error_code: "trainer_crashed", exit_code: 1 });
    expect(logBytes).toBeLessThanOrEqual(1024 * 1024);
    expect(log.startsWith("FIRST LINE\n")).toBe(true);
    expect(log.trimEnd().endsWith("LAST LINE")).toBe(true);
    expect(log).toMatch(/\[lora-worker: \d+ bytes of trainer output dropped here to keep this log under 1048576 bytes\]/);
  });
});

describe("leftovers outside the process group", () => {
  test("cancel also kills a grandchild that called setsid, found by the job marker in its environment", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "escaping-grandchild.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    const id = job.id;
    const escapee = await waitFor(() => Number(/escapee (\d+)/.exec(readFileSync(s.store.get(id)!.log_path, "utf8"))?.[1] ?? 0), "the escapee to start");
    expect(readProcStat(escapee)!.pgrp).not.toBe(s.store.get(id)!.pid);

    await s.supervisor.cancel(id);

    expect(strayProcesses(id)).toEqual([]);
    const stat = readProcStat(escapee);
    expect(stat === null || stat.state === "Z").toBe(true);
  });

  test("contrast: a process-group kill alone leaves the setsid grandchild alive", async () => {
    const marker = `contrast-${process.pid}`;
    const proc = Bun.spawn([join(TRAINERS, "escaping-grandchild.sh")], { detached: true, stdout: "pipe", env: { ...process.env, LORA_WORKER_JOB: marker } });
    let out = "";
    const reader = (async () => {
      for await (const chunk of proc.stdout) out += new TextDecoder().decode(chunk);
    })();
    try {
      const escapee = await waitFor(() => Number(/escapee (\d+)/.exec(out)?.[1] ?? 0), "the escapee to start");
      await terminateGroup(proc.pid, 300);
      expect(strayProcesses(marker)).toContain(escapee);
    } finally {
      // One listed may end before its kill (the group's members die of terminateGroup meanwhile).
      killAll(strayProcesses(marker));
      await reader;
    }
  });
});
