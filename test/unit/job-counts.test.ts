import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { failedOutcome } from "../../src/job.ts";
import { openJobStore } from "../../src/store/job-store.ts";
import { makeHostTree } from "../support/host-tree.ts";

// What the database itself says, read by a second connection to the real file.
function countsOnDisk(path: string): Record<string, number> {
  using db = new Database(path, { readonly: true });
  return Object.fromEntries(db.query<{ status: string; n: number }, []>("SELECT status, count(*) AS n FROM jobs GROUP BY status").all().map((r) => [r.status, r.n]));
}

// What the database itself says, failed jobs by error_code.
function failuresOnDisk(path: string): Record<string, number> {
  using db = new Database(path, { readonly: true });
  return Object.fromEntries(db.query<{ code: string; n: number }, []>("SELECT error_code AS code, count(*) AS n FROM jobs WHERE status = 'failed' GROUP BY error_code").all().map((r) => [r.code, r.n]));
}

const job = (i: number) => ({ id: `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`, request: {}, requestHash: `h${i}`, idempotencyKey: null, admissionWarning: null, simulated: true, logPath: `/x/${i}`, now: new Date(i * 1000).toISOString(), totalSteps: 400, dataset: null, phase: "preparing" as const });
const nonZero = (c: Record<string, number>) => Object.fromEntries(Object.entries(c).filter(([, n]) => n !== 0));

// Three jobs through every transition: two fail cuda_oom, one is cancelled; each claim and end is tried twice.
function runThree(store: ReturnType<typeof openJobStore>, from = 0): void {
  for (let i = from; i < from + 3; i++) {
    store.insertIfIdle(job(i));
    // Contrast: a second claim while one is active changes nothing, in memory as on disk.
    store.insertIfIdle(job(100 + i));
    store.markTraining(job(i).id);
    store.markTraining(job(i).id);
    store.finish(job(i).id, i === from + 2 ? { ...failedOutcome("trainer_crashed", "x"), status: "cancelled", error_code: null } : failedOutcome("cuda_oom", "x"), new Date().toISOString());
    store.finish(job(i).id, failedOutcome("cuda_oom", "again"), new Date().toISOString());
  }
}

describe("per-status and per-error_code counts kept in memory", () => {
  test("follow every transition after the first read exactly as the database records it, and survive a reopen", () => {
    using tree = makeHostTree();
    const path = join(tree.state, "jobs.db");
    const store = openJobStore(path);
    expect(store.countByStatus()).toEqual({});
    runThree(store);
    const onDisk = countsOnDisk(path);
    expect(nonZero(store.countByStatus())).toEqual(onDisk);
    expect(onDisk).toEqual({ failed: 2, cancelled: 1 });
    expect(store.countFailuresByCode()).toEqual(failuresOnDisk(path));
    store.close();
    const reopened = openJobStore(path, { integrityCheck: false });
    expect(nonZero(reopened.countByStatus())).toEqual(onDisk);
    reopened.close();
  });

  test("are counted at the first read, not at open: transitions before it are counted once, those after it kept", () => {
    using tree = makeHostTree();
    const path = join(tree.state, "jobs.db");
    const store = openJobStore(path);
    runThree(store);
    expect(nonZero(store.countByStatus())).toEqual({ failed: 2, cancelled: 1 });
    runThree(store, 10);
    expect(nonZero(store.countByStatus())).toEqual(countsOnDisk(path));
    expect(nonZero(store.countByStatus())).toEqual({ failed: 4, cancelled: 2 });
    expect(store.countFailuresByCode()).toEqual({ cuda_oom: 4 });
    store.close();
  });
});

describe("rows read from memory", () => {
  // The row as the database holds it, decoded as a Job is: its JSON columns parsed, its 0/1 columns booleans.
  const rowOnDisk = (path: string, id: string) => {
    using db = new Database(path, { readonly: true });
    const row = db.query("SELECT * FROM jobs WHERE id = ?").get(id) as Record<string, any>;
    const list = (text: string | null) => (text === null ? [] : JSON.parse(text));
    return {
      ...row, request: JSON.parse(row.request), simulated: row.simulated === 1, forced_kill: row.forced_kill === 1,
      checkpoints: list(row.checkpoints), samples: list(row.samples),
    };
  };

  test("a row read again after any write is what the database holds, and a read row cannot be changed in place", () => {
    using tree = makeHostTree();
    const path = join(tree.state, "jobs.db");
    const store = openJobStore(path);
    const id = "00000000-0000-4000-8000-000000000001";
    store.insertIfIdle({ id, request: {}, requestHash: "h", idempotencyKey: null, admissionWarning: null, simulated: true, logPath: "/x", now: new Date(0).toISOString(), totalSteps: 400, dataset: null, phase: "preparing" });
    const writes: Array<() => unknown> = [
      () => store.markTraining(id),
      () => store.saveProgressUnsynced(id, { phase: "training", step: 7, total_steps: 400, loss: 0.1, eta_s: 30 }, [[7, 0.1]]),
      () => store.requestPause(id, new Date(1000).toISOString()),
      () => store.saveResumePoint(id, { step: 40, state: "/out/state", digest: null, checkpoints: [], gone: null }),
      () => store.requestStop(id, "cancel", new Date(2000).toISOString()),
      () => store.finish(id, failedOutcome("cuda_oom", "x"), new Date(3000).toISOString()),
      () => store.markPruned([{ id, dir: "/state/jobs/x" }], new Date(4000).toISOString()),
    ];
    for (const write of writes) {
      const before = store.get(id);
      write();
      expect(store.get(id)).not.toEqual(before);
      expect(store.get(id)).toEqual(rowOnDisk(path, id) as never);
    }
    const row = store.get(id)!;
    expect(() => Object.assign(row, { status: "training" })).toThrow(TypeError);
    // Contrast: the row really is kept; a write behind the store's back (never done by the worker) is not seen.
    using other = new Database(path);
    other.run("UPDATE jobs SET error = 'changed elsewhere' WHERE id = ?", [id]);
    expect(store.get(id)!.error).not.toBe("changed elsewhere");
    store.close();
  });
});
