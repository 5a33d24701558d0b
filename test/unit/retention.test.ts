import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { failedOutcome } from "../../src/job.ts";
import { openJobStore } from "../../src/store/job-store.ts";
import { jobDir } from "../../src/job-dir/job-dir.ts";
import { createRetention } from "../../src/supervisor/retention.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { silentLogger } from "../support/real-mode.ts";

const DAY = 24 * 60 * 60 * 1000;
const NOW = Date.parse("2026-11-30T12:00:00Z");
const daysAgo = (d: number) => new Date(NOW - d * DAY).toISOString();

// Jobs recorded in a real database with real directories: `ended` days ago (null: still running).
function history(tree: HostTree, ended: Array<number | null>) {
  const store = openJobStore(join(tree.state, "jobs.db"));
  const ids = ended.map((age, i) => {
    const id = `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
    const paths = jobDir(tree.state, id);
    mkdirSync(join(paths.dataset, "images"), { recursive: true });
    writeFileSync(paths.log, "x".repeat(1000));
    writeFileSync(join(paths.dataset, "images", "img0.png"), "y".repeat(500));
    const inserted = store.insertIfIdle({ id, request: {}, requestHash: id, idempotencyKey: null, admissionWarning: null, simulated: true, logPath: paths.log, now: daysAgo(age ?? 0), totalSteps: 400, dataset: null, phase: "preparing" });
    if (!inserted.ok) throw new Error("a job is still active");
    if (age !== null) store.finish(id, failedOutcome("trainer_crashed", "test"), daysAgo(age));
    return id;
  });
  return { store, ids };
}

describe("retention", () => {
  test("directories of ended jobs past keep_days go, the newest keep_last and the active job stay, records stay", async () => {
    using tree = makeHostTree();
    const { store, ids } = history(tree, [90, 60, 45, 40, 5, null]);
    const retention = createRetention({ store, stateDir: tree.state, keepDays: 30, keepLast: 3, now: () => new Date(NOW), log: silentLogger });

    const pruned = await retention.prune();

    // 90, 60 and 45 days old and not among the newest three (40, 5, running): gone.
    expect(pruned).toEqual({ jobs: ids.slice(0, 3), bytes: 3 * 1500 });
    expect(ids.map((id) => existsSync(jobDir(tree.state, id).dir))).toEqual([false, false, false, true, true, true]);
    expect(ids.map((id) => store.get(id)?.pruned_at !== null)).toEqual([true, true, true, false, false, false]);
    expect(store.get(ids[0]!)?.status).toBe("failed");
    expect(retention.stateBytes()).toBeGreaterThan(3 * 1500);
    store.close();
  });

  test("contrast: with everything younger than keep_days, nothing is pruned, and a second round prunes nothing twice", async () => {
    using tree = makeHostTree();
    const { store, ids } = history(tree, [20, 10, 1]);
    const retention = createRetention({ store, stateDir: tree.state, keepDays: 30, keepLast: 0, now: () => new Date(NOW), log: silentLogger });
    expect(await retention.prune()).toEqual({ jobs: [], bytes: 0 });
    const later = createRetention({ store, stateDir: tree.state, keepDays: 15, keepLast: 0, now: () => new Date(NOW), log: silentLogger });
    expect((await later.prune()).jobs).toEqual([ids[0]!]);
    expect((await later.prune()).jobs).toEqual([]);
    store.close();
  });

  test("a pruned job's state goes with its directory; a directory holding the state a successor resumes from stays", async () => {
    using tree = makeHostTree();
    // 0: its own state; 1: resumed by 2, which saved none of its own yet; 2: young; 3: a state an older version
    // saved into the output dir; 4: the newest.
    const { store, ids } = history(tree, [90, 80, 5, 60, 1]);
    const own = (i: number) => join(jobDir(tree.state, ids[i]!).run, `lora${i}-step00000040-state`);
    const legacy = join(tree.handoff, "out", "lora3-step00000040-state");
    const states = [own(0), own(1), own(1), legacy];
    for (const [i, state] of states.entries()) {
      mkdirSync(state, { recursive: true });
      writeFileSync(join(state, "model.safetensors"), "z".repeat(100));
      store.saveResumePoint(ids[i]!, { step: 40, state, digest: "d", checkpoints: [], gone: null });
    }
    const db = new Database(join(tree.state, "jobs.db"));
    db.run("UPDATE jobs SET resumed_by=? WHERE id=?", [ids[2]!, ids[1]!]);
    db.close();
    const retention = createRetention({ store, stateDir: tree.state, keepDays: 30, keepLast: 1, now: () => new Date(NOW), log: silentLogger });

    // The directories weigh 1500 bytes and 100 for a state in them; the output dir's state 100.
    expect(await retention.prune()).toEqual({ jobs: [ids[0]!, ids[3]!], bytes: 1600 + 1500 + 100 });
    expect([own(0), own(1), legacy].map((s) => existsSync(s))).toEqual([false, true, false]);
    expect(store.get(ids[0]!)).toMatchObject({ resume_step: null, resume_state: null, resume_gone: "its saved state was pruned by retention with its job directory" });
    expect(store.get(ids[2]!)).toMatchObject({ resume_step: 40, resume_state: own(1), pruned_at: null });
    expect(store.get(ids[1]!)?.pruned_at).toBeNull();
    // Contrast: once the successor no longer offers that state, the old directory goes at the next round.
    store.dropResume(ids[2]!, "test");
    expect((await retention.prune()).jobs).toEqual([ids[1]!]);
    store.close();
  });

  test("a job marked by a round that was killed before it removed the directory: the next round removes it", async () => {
    using tree = makeHostTree();
    const { store, ids } = history(tree, [90, 1]);
    const dir = jobDir(tree.state, ids[0]!).dir;
    expect(store.markPruned([{ id: ids[0]!, dir }], new Date(NOW).toISOString())).toEqual([ids[0]!]);
    expect(existsSync(dir)).toBe(true);
    const retention = createRetention({ store, stateDir: tree.state, keepDays: 30, keepLast: 0, now: () => new Date(NOW), log: silentLogger });
    expect(await retention.prune()).toEqual({ jobs: [], bytes: 1500 });
    expect(existsSync(dir)).toBe(false);
    // Contrast: the unmarked young job's directory stays.
    expect(existsSync(jobDir(tree.state, ids[1]!).dir)).toBe(true);
    store.close();
  });
});
