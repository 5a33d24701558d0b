import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cancelledOutcome, failedOutcome } from "../../src/job.ts";
import { openJobStore } from "../../src/store/job-store.ts";
import { makeHostTree } from "../support/host-tree.ts";

// Issue 35, §3, at the store: the final record of a resume that never started a trainer gives the chain back to its
// predecessor in the same commit; one that started keeps it. A real SQLite file.
const id = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`;
const STATE = "/state/jobs/a/run/mylora-step00000040-state";
const now = () => new Date().toISOString();
const newJob = (i: number) => ({
  id: id(i), request: {}, requestHash: `h${i}`, idempotencyKey: null, admissionWarning: null, simulated: true,
  logPath: `/x/${i}`, now: new Date(i * 1000).toISOString(), totalSteps: 400, dataset: null, phase: "preparing" as const,
});

// A failed with its state at step 40, and B = resume(A) claimed on it.
function chain(path: string) {
  const store = openJobStore(path);
  store.insertIfIdle(newJob(1));
  store.saveResumePoint(id(1), { step: 40, state: STATE, digest: "d", checkpoints: [], gone: null });
  store.finish(id(1), failedOutcome("cuda_oom", "x"), now());
  const claimed = store.insertIfIdle({ ...newJob(2), resumes: { id: id(1), step: 40, state: STATE, digest: "d" } });
  expect(claimed.ok).toBe(true);
  expect(store.get(id(1))!.resumed_by).toBe(id(2));
  return store;
}

describe("a resume's final record", () => {
  test("one that never started a trainer hands the chain back, saying which job to resume", () => {
    using tree = makeHostTree();
    const store = chain(join(tree.state, "jobs.db"));
    expect(store.finish(id(2), cancelledOutcome(), now())).toBe(true);
    expect(store.get(id(1))).toMatchObject({ resumed_by: null, resume_step: 40, resume_state: STATE });
    expect(store.get(id(2))).toMatchObject({
      status: "cancelled", resumed_from: id(1), resume_step: null, resume_state: null, resume_digest: null,
      resume_gone: `it ended before its trainer started and took nothing from job ${id(1)}: ` +
        `resume job ${id(1)} instead (its saved state at step 40)`,
    });
    expect(store.countSaved().resumable).toBe(1);
    store.close();
  });

  test("contrast: one whose trainer started keeps the chain and the state it offers", () => {
    using tree = makeHostTree();
    const store = chain(join(tree.state, "jobs.db"));
    store.markSpawned(id(2), { pid: 1, startTicks: 1, bootId: "b" }, now());
    expect(store.finish(id(2), cancelledOutcome(), now())).toBe(true);
    expect(store.get(id(1))!.resumed_by).toBe(id(2));
    expect(store.get(id(2))).toMatchObject({ resume_step: 40, resume_state: STATE, resume_gone: null });
    store.close();
  });
});
