import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { readProcStat, markedProcessesOf as strayProcesses } from "../../src/os/proc.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { dispatchOk, REAL_LOGS, simulateModeConfig, SIMULATOR, supervisorFor } from "../support/real-mode.ts";
import { waitFor } from "../support/wait.ts";

setDefaultTimeout(60_000);

// What each real log must end as when the worker supervises its replay: status, code, last steps: bar.
const EXPECTED: Array<[string, Record<string, unknown>]> = [
  ["sdscripts-success-1.log", { status: "succeeded", error_code: null, step: 2000, total_steps: 2000, loss: 0.0702 }],
  ["sdscripts-oom-2.log", { status: "failed", error_code: "cuda_oom", step: 0, total_steps: 2300, loss: null }],
  ["sdscripts-nodata-2.log", { status: "failed", error_code: "dataset_empty", step: 0, total_steps: null, loss: null }],
  ["sdscripts-accelerate-1.log", { status: "failed", error_code: "trainer_crashed", step: 0, total_steps: null, loss: null }],
  ["sdscripts-traceback-truncated-2.log", { status: "failed", error_code: "trainer_crashed", step: 0, total_steps: 1500, loss: null }],
  ["sdscripts-rich-1.log", { status: "failed", error_code: "trainer_crashed", step: 0, total_steps: null, loss: null }],
  ["sdscripts-epochs-rich-nan-1.log", { status: "failed", error_code: "nan_loss", step: 205, total_steps: 3280, loss: null }],
  ["sdscripts-ignored-exception-1.log", { status: "succeeded", error_code: null, step: 1500, total_steps: 1500, loss: null }],
  ["sdscripts-raw-redraws-1.log", { status: "failed", error_code: "nan_loss", step: 205, total_steps: 3280, loss: null }],
  // Real sd-scripts under the worker on the CPU (bun run real-trainer).
  ["sdscripts-cpu-no-data-1.log", { status: "failed", error_code: "dataset_empty", step: 0, total_steps: null, loss: null }],
  ["sdscripts-tokenizer-missing-1.log", { status: "failed", error_code: "tokenizer_missing", step: 0, total_steps: null, loss: null }],
  ["sdscripts-cpu-oom-killed-1.log", { status: "failed", error_code: "host_oom_killed", step: 0, total_steps: null, loss: null }],
];

// Replays `log` under the supervisor and returns the ended job's record and loss history.
async function supervisedReplay(log: string) {
  using tree = makeHostTree();
  const config = simulateModeConfig(tree, { replay_log: log, replay_speed: 20_000 });
  await using s = supervisorFor(tree, config, SIMULATOR);
  const job = await dispatchOk(s, tree.validRequest());
  await s.supervisor.untilIdle();
  return { row: s.store.get(job.id)!, history: s.store.lossHistory(job.id) };
}

describe("real sd-scripts logs replayed through the simulator", () => {
  for (const [log, expected] of EXPECTED) {
    test(`${log} ends ${expected.status}${expected.error_code ? `/${expected.error_code}` : ""} at its last steps: bar`, async () => {
      const { row } = await supervisedReplay(join(REAL_LOGS, log));
      expect({ status: row.status, error_code: row.error_code, step: row.step, total_steps: row.total_steps, loss: row.loss }).toEqual(expected as never);
      if (row.status === "succeeded") expect(row.lora_sha256).toMatch(/^[0-9a-f]{64}$/);
    });
  }

  test("every nan redraw of a raw capture's one line is a step the supervisor sees; the terminal's view of that line is one", async () => {
    const recorded = readFileSync(join(REAL_LOGS, "sdscripts-raw-redraws-1.log"), "utf8");
    const dir = mkdtempSync(join(tmpdir(), "replay-terminal-view-"));
    try {
      const terminalView = join(dir, "terminal-view.log");
      writeFileSync(terminalView, recorded.slice(recorded.lastIndexOf("\r") + 1));
      const [raw, viewed] = await Promise.all([supervisedReplay(join(REAL_LOGS, "sdscripts-raw-redraws-1.log")), supervisedReplay(terminalView)]);
      expect(raw.history).toEqual([[41, null], [82, null], [123, null], [164, null], [205, null]]);
      expect(viewed.history).toEqual([[205, null]]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("misbehaving simulated trainers", () => {
  for (const fail of ["ignore-sigterm,orphan@2", "ignore-sigterm,setsid-orphan@2"]) {
    test(`cancel leaves nothing of a "${fail}" tree in /proc`, async () => {
      using tree = makeHostTree();
      await using s = supervisorFor(tree, simulateModeConfig(tree, { seconds_per_step: 0.05, fail }), SIMULATOR);
      const job = await dispatchOk(s, tree.validRequest());
      const id = job.id;
      await waitFor(() => (s.supervisor.fresh((live) => live(id))?.step ?? 0) >= 3, "the orphan to be spawned at step 2");
      const pgid = s.store.get(id)!.pid!;
      const members = [...liveGroupMembers(pgid), ...strayProcesses(id)];
      expect(members.length).toBeGreaterThanOrEqual(2);

      const final = await s.supervisor.cancel(id);

      expect(final).toMatchObject({ status: "cancelled", forced_kill: true });
      expect(members.filter((pid) => readProcStat(pid) !== null && readProcStat(pid)!.state !== "Z")).toEqual([]);
    });
  }

  test("an out-of-memory at step 3 fails as cuda_oom with exit code 1", async () => {
    using tree = makeHostTree();
    await using s = supervisorFor(tree, simulateModeConfig(tree, { seconds_per_step: 0, fail: "oom@3" }), SIMULATOR);
    const job = await dispatchOk(s, tree.validRequest());
    await s.supervisor.untilIdle();
    expect(s.store.get(job.id)).toMatchObject({ status: "failed", error_code: "cuda_oom", exit_code: 1, step: 2 });
  });
});
