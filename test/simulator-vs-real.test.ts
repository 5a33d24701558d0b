import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { inProcessApp } from "./support/app-harness.ts";
import { makeHostTree } from "./support/host-tree.ts";
import { classify, kindSequence, shapesByKind } from "./support/log-kinds.ts";
import { SIMULATOR, simulateModeConfig } from "./support/real-mode.ts";
import { waitFor } from "./support/wait.ts";

// Real sd-scripts under the worker on the CPU (`bun run real-trainer`, test/fixtures/real/SOURCES.md) wrote these
// two logs: a smoke run paused at its first state, and its resume to the end. The simulator runs the same smoke
// run here; every kind of line the worker reads, or that tells a person where a run is, must come in the same
// order and take the same shapes.
const FIXTURES = join(import.meta.dir, "fixtures", "real");
const REAL = {
  paused: join(FIXTURES, "sdscripts-cpu-smoke-paused-1.log"),
  resumed: join(FIXTURES, "sdscripts-cpu-smoke-resumed-1.log"),
};
const TIMEOUT_MS = 60_000;
// Slow enough that the pause lands on the state at step 2 before step 3 ends, as on the CPU.
const SECONDS_PER_STEP = 0.2;

const simulated = { paused: "", resumed: "" };

// One smoke run through the simulator, as the worker runs it: dispatched paused, then resumed to its end.
beforeAll(async () => {
  using tree = makeHostTree();
  const config = { ...simulateModeConfig(tree, { seconds_per_step: SECONDS_PER_STEP }), smoke: { base_model: tree.model } };
  await using a = inProcessApp(tree, config, SIMULATOR);
  const post = (path: string, body: unknown) =>
    a.json(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const ended = (id: string) =>
    waitFor(async () => {
      const { body } = await a.json(`/train/${id}`);
      return ["succeeded", "failed", "cancelled"].includes(body.status) ? body : null;
    }, `job ${id} to end`);
  const first = await ended((await post("/smoke", { device_index: 0 })).body.worker_job_id);
  expect(first).toMatchObject({ paused: true, resume_step: 2 });
  const second = await ended((await post(`/train/${first.worker_job_id}/resume`, {})).body.worker_job_id);
  expect(second.status).toBe("succeeded");
  const log = (id: string) => Bun.file(join(tree.state, "jobs", id, "train.log")).text();
  simulated.paused = await log(first.worker_job_id);
  simulated.resumed = await log(second.worker_job_id);
}, TIMEOUT_MS);

describe("the simulator says what real sd-scripts said under the worker", () => {
  for (const run of ["paused", "resumed"] as const) {
    test(`a smoke run ${run}: the same kinds of lines, in the same order`, async () => {
      const real = classify(await Bun.file(REAL[run]).text());
      expect(kindSequence(classify(simulated[run]))).toEqual(kindSequence(real));
    });

    test(`a smoke run ${run}: each kind of line in the same shapes`, async () => {
      const real = classify(await Bun.file(REAL[run]).text());
      expect(shapesByKind(classify(simulated[run]))).toEqual(shapesByKind(real));
    });
  }

  test("the kinds cover what the worker reads: the steps bar, states, samples, the resume and the end", async () => {
    const kinds = new Set(kindSequence(classify(await Bun.file(REAL.resumed).text())));
    for (const kind of ["steps bar", "total steps", "caching", "sampling", "state", "resume", "model saved"]) {
      expect(kinds).toContain(kind);
    }
  });

  test("contrast: the comparison tells a paused run from a resumed one", async () => {
    const real = classify(await Bun.file(REAL.paused).text());
    expect(kindSequence(classify(simulated.resumed))).not.toEqual(kindSequence(real));
    expect(shapesByKind(classify(simulated.resumed))).not.toEqual(shapesByKind(real));
  });
});
