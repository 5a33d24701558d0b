import { describe, expect, test } from "bun:test";
import { copyFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { inProcessApp } from "../support/app-harness.ts";
import { FACES_480 as FACES, realScoring, SCORER_TEST_MS } from "../support/face-scorer.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { untilEnded } from "../support/jobs.ts";

// Simulated fast runs (previews at steps 100, 200, 300 and 400) whose previews are real photos, scored by the real
// face model against a dataset of three photos of Barack Obama (the face_recognition 1.3.0 sdist's test images, at
// 480 px).
const TIMEOUT_MS = SCORER_TEST_MS;
const SCORING = realScoring();
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

// Reads a text/event-stream to its end (the server closes it after "end"): each event's name and data.
async function readEvents(res: Response): Promise<Array<{ event: string; data: any }>> {
  const blocks = (await res.text()).split("\n\n").filter((block) => block.includes("data:"));
  const field = (block: string, name: string) =>
    block.split("\n").find((l) => l.startsWith(`${name}:`))?.slice(name.length + 1).trim() ?? "";
  return blocks.map((block) => ({ event: field(block, "event"), data: JSON.parse(field(block, "data")) }));
}

// A run that learns at step 300, followed on its event stream (so its output is read every 100 ms, and each state
// announced in time to keep its LoRA): the app, the events and the final record.
async function learnedRun(check: (a: ReturnType<typeof inProcessApp>, events: any[], final: any) => Promise<void>) {
  using tree = makeHostTree();
  obamaDataset(tree);
  const simulate = { seconds_per_step: 0.01, preview_subject: SUBJECT, preview_other: OTHER, preview_learned_at: 300 };
  await using a = inProcessApp(tree, simulateModeConfig(tree, simulate), SIMULATOR, { likeness: SCORING });
  const init = { method: "POST", headers: { "content-type": "application/json" } };
  const { body } = await a.json("/train", { ...init, body: JSON.stringify(tree.validRequest({ samples: 1 })) });
  const events = await readEvents(await a.app.request(`/train/${body.worker_job_id}/events`));
  await check(a, events, (await a.json(`/train/${body.worker_job_id}`)).body);
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
    expect(likeness.next_step).toStartWith("take the LoRA of `best_step` (`best_url`)");
    expect(matches(likeness).at(-1)).toEqual([400, true, true]);
  }, TIMEOUT_MS);

  test("previews with no face (one colour, as the CPU harness's random SDXL draws): not_scored", async () => {
    const likeness = await likenessOf({});
    expect(likeness).toMatchObject({ verdict: "not_scored", reason: "no_face_in_previews", best_step: null });
    expect(likeness.points.map((p: any) => [p.step, p.trigger.faces, p.class.faces])).toEqual([
      [100, 0, 0], [200, 0, 0], [300, 0, 0], [400, 0, 0],
    ]);
  }, TIMEOUT_MS);

  test("the best step's LoRA is kept past the run with the other preview points', and its bytes hash to best_sha256", async () => {
    await learnedRun(async (a, _events, final) => {
      expect(final.likeness).toMatchObject({ verdict: "learned", best_step: 300 });
      expect(final.checkpoints.map((c: any) => c.step)).toEqual([100, 200, 300, 400]);
      const best = final.checkpoints.find((c: any) => c.step === 300);
      expect(final.likeness.best_url).toBe(best.url);
      const res = await a.app.request(final.likeness.best_url);
      expect(res.status).toBe(200);
      const bytes = new Uint8Array(await res.arrayBuffer());
      const sha256 = new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
      expect([sha256, res.headers.get("x-lora-sha256")]).toEqual([final.likeness.best_sha256, final.likeness.best_sha256]);
      // Prometheus counts the verdict; contrast: the verdicts no run reached are 0.
      const metrics = await (await a.app.request("/metrics")).text();
      expect(metrics).toContain('lora_worker_likeness_verdicts_total{verdict="learned"} 1\n');
      expect(metrics).toContain('lora_worker_likeness_verdicts_total{verdict="overfit"} 0\n');
      // Contrast: a LoRA saved between the preview points (every 25 steps) was not kept.
      const between = await a.app.request(`/train/${final.worker_job_id}/checkpoints/275`);
      expect(between.status).toBe(404);
      const argv: string[] = (await Bun.file(join(a.store.get(final.worker_job_id)!.log_path, "..", "launch.json")).json()).argv;
      expect(argv.filter((f) => /^--(save|sample)_every_n_steps=/.test(f))).toEqual(["--save_every_n_steps=25", "--sample_every_n_steps=100"]);
    });
  }, TIMEOUT_MS);

  test("the event stream sends each point as it is scored, then the verdict with the end", async () => {
    await learnedRun(async (_a, events) => {
      const counts = events.map((e) => e.data.likeness?.points.length ?? 0);
      expect(counts).toEqual(counts.toSorted((x: number, y: number) => x - y));
      expect([1, 2, 3].every((n) => counts.includes(n))).toBe(true);
      const verdicts = events.filter((e) => e.data.likeness?.verdict != null).map((e) => e.event);
      // Contrast: no event before the end carries a verdict.
      expect(verdicts.at(0)).not.toBe(undefined);
      expect(events.findIndex((e) => e.data.likeness?.verdict != null)).toBeGreaterThanOrEqual(events.length - 2);
      expect(events.at(-1)).toMatchObject({ event: "end", data: { likeness: { verdict: "learned", best_step: 300 } } });
    });
  }, TIMEOUT_MS);

  test("a scorer whose Python lacks the face model: not_scored (scorer_missing), and the job still succeeded", async () => {
    // The system's Python, without dlib (a fluxgym venv's case): the scorer says it cannot import the model.
    const broken = realScoring("/usr/bin/python3");
    const likeness = await likenessOf({ preview_subject: SUBJECT, preview_learned_at: 100 }, {}, broken);
    expect(likeness).toMatchObject({ verdict: "not_scored", reason: "scorer_missing", points: [], best_step: null });
  }, TIMEOUT_MS);

  test("contrast: without previews, or without a scorer, nothing is scored and the record says why", async () => {
    expect(await likenessOf({}, { samples: 0 })).toMatchObject({ verdict: "not_scored", reason: "no_previews", points: [] });
    expect(await likenessOf({ preview_subject: SUBJECT, preview_learned_at: 100 }, {}, null as never)).toMatchObject({
      verdict: "not_scored", reason: "scorer_missing", points: [],
    });
  }, TIMEOUT_MS);
});
