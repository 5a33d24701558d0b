import { describe, expect, test } from "bun:test";
import { copyFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { inProcessApp } from "../support/app-harness.ts";
import { FACES, realEmbedder } from "../support/face-embedder.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { untilEnded } from "../support/jobs.ts";

// Simulated fast runs (previews at steps 100, 200, 300 and 400) whose previews are real photos, scored by the real
// face model against a dataset of three photos of Barack Obama (the face_recognition 1.3.0 sdist's test images).
const TIMEOUT_MS = 180_000;
const SCORING = { embedder: realEmbedder(), threshold: 0.6 };
const [SUBJECT, OTHER] = [join(FACES, "obama2.jpg"), join(FACES, "biden.jpg")];

function obamaDataset(tree: HostTree): void {
  for (const name of readdirSync(tree.dataset)) rmSync(join(tree.dataset, name));
  for (const name of ["obama.jpg", "obama3.jpg", "obama2.jpg"]) copyFileSync(join(FACES, name), join(tree.dataset, name));
}

async function likenessOf(simulate: Record<string, unknown>, request: Record<string, unknown> = {}, scoring = SCORING) {
  using tree = makeHostTree();
  obamaDataset(tree);
  const config = simulateModeConfig(tree, { seconds_per_step: 0, ...simulate });
  await using a = inProcessApp(tree, config, SIMULATOR, scoring === null ? {} : { likeness: scoring });
  const init = { method: "POST", headers: { "content-type": "application/json" } };
  const { status, body } = await a.json("/train", { ...init, body: JSON.stringify(tree.validRequest({ samples: 1, ...request })) });
  expect(status).toBe(200);
  const final = await untilEnded(a, body.worker_job_id, TIMEOUT_MS - 10_000);
  // A verdict is information: the job succeeded whatever it says.
  expect(final.status).toBe("succeeded");
  return final.likeness;
}

// Per point: whether the trigger's and the class's previews match the person.
const matches = (likeness: any) =>
  likeness.points.map((p: any) => [p.step, p.trigger.distance <= 0.6, p.class.distance !== null && p.class.distance <= 0.6]);

describe("the likeness of a simulated run, scored by the real face model", () => {
  test("the trigger's previews turn from Biden to Obama at step 200, the class's stay Biden: learned, best step 200", async () => {
    const likeness = await likenessOf({ preview_subject: SUBJECT, preview_other: OTHER, preview_learned_at: 200 });
    expect(likeness).toMatchObject({ verdict: "learned", reason: null, best_step: 200, threshold: 0.6 });
    expect(matches(likeness)).toEqual([[100, false, false], [200, true, false], [300, true, false], [400, true, false]]);
    const first = likeness.points[0];
    expect(first.trigger).toMatchObject({ faces: 1, files: [expect.stringMatching(/^mylora_000100_00_/)] });
    expect(first.trigger.distance).toBeGreaterThan(0.7);
    expect(likeness.points[1].trigger.distance).toBeLessThan(0.45);
  }, TIMEOUT_MS);

  test("the trigger's previews never show Obama: undertrained", async () => {
    const likeness = await likenessOf({ preview_subject: SUBJECT, preview_other: OTHER });
    expect(likeness.verdict).toBe("undertrained");
    expect(matches(likeness).map(([, trigger]: any) => trigger)).toEqual([false, false, false, false]);
  }, TIMEOUT_MS);

  test("the class-only previews show Obama at the end: overfit, and the best step is one before the bleed", async () => {
    const simulate = { preview_subject: SUBJECT, preview_other: OTHER, preview_learned_at: 100, preview_bleed_at: 400 };
    const likeness = await likenessOf(simulate);
    expect(likeness).toMatchObject({ verdict: "overfit", best_step: 100 });
    expect(matches(likeness).at(-1)).toEqual([400, true, true]);
  }, TIMEOUT_MS);

  test("previews with no face (one colour, as the CPU harness's random SDXL draws): not_scored", async () => {
    const likeness = await likenessOf({});
    expect(likeness).toMatchObject({ verdict: "not_scored", reason: "no_face_in_previews", best_step: null });
    expect(likeness.points.map((p: any) => [p.step, p.trigger.faces, p.class.faces])).toEqual([
      [100, 0, 0], [200, 0, 0], [300, 0, 0], [400, 0, 0],
    ]);
  }, TIMEOUT_MS);

  test("contrast: without previews, or without a scorer, nothing is scored and the record says why", async () => {
    expect(await likenessOf({}, { samples: 0 })).toMatchObject({ verdict: "not_scored", reason: "no_previews", points: [] });
    expect(await likenessOf({ preview_subject: SUBJECT, preview_learned_at: 100 }, {}, null as never)).toMatchObject({
      verdict: "not_scored", reason: "scorer_missing", points: [],
    });
  }, TIMEOUT_MS);
});
