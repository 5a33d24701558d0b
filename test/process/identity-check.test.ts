import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { solidPng } from "../../src/png.ts";
import { FACES_480 as FACES, groupPhoto, likenessTable, SCORER_TEST_MS } from "../support/face-scorer.ts";
import { makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { untilEnded } from "../support/jobs.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";

// The upload check (#47 item 2) through a worker process over HTTP, scored by the real face model in the test
// venv on the face_recognition 1.3.0 sdist's photos of Barack Obama and Joe Biden.
const TIMEOUT_MS = SCORER_TEST_MS;

function dataset(tree: HostTree, photos: Record<string, string | Uint8Array>): void {
  for (const name of readdirSync(tree.dataset)) rmSync(join(tree.dataset, name));
  for (const [name, from] of Object.entries(photos)) {
    if (typeof from === "string") copyFileSync(join(FACES, from), join(tree.dataset, name));
    else writeFileSync(join(tree.dataset, name), from);
  }
}

const OBAMA = { "a.jpg": "obama.jpg", "b.jpg": "obama2.jpg", "c.jpg": "obama3.jpg", "d.jpg": "obama_partial_face.jpg" };

// The identity of the dataset the worker prepared for a job of the tree's request: once prepared, its run is
// cancelled (the simulator would train for minutes otherwise).
const SCORER = likenessTable();

async function identityOf(tree: HostTree, likeness = SCORER) {
  await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.5) + likeness));
  return (await identityOfJob(worker, tree)).identity;
}

// The dataset report of a job of the tree's request on `worker`.
async function identityOfJob(worker: Awaited<ReturnType<typeof startWorker>>, tree: HostTree) {
  const posted = await worker.postTrain(tree.validRequest());
  expect(posted.status).toBe(200);
  const id = posted.body.worker_job_id as string;
  const job = async () => (await worker.json(`/train/${id}`)).body;
  const prepared = await waitFor(async () => (await job()).dataset?.prepared, "the dataset prepared", TIMEOUT_MS - 30_000);
  await worker.request(`/train/${id}/cancel`, { method: "POST" });
  await untilEnded(worker, id);
  return prepared;
}

describe("the upload check: whose faces a dataset's photos show", () => {
  test("four photos of one person and one of another: the other is other_person with its distance", async () => {
    using tree = makeHostTree(0);
    dataset(tree, { ...OBAMA, "e.jpg": "biden.jpg" });
    const identity = await identityOf(tree);
    expect(identity).toMatchObject({ scored: true, reason: null, photos: { one_face: 5, no_face: 0, several_faces: 0 } });
    expect(identity.notes).toEqual([
      {
        file: "e.jpg", note: "other_person", distance: expect.closeTo(0.81, 1), threshold: 0.6,
        text: expect.stringMatching(/^someone else: 0\.\d+ from the others' face, past 0\.6$/),
      },
    ]);
  }, TIMEOUT_MS);

  test("the same four photos alone give no note (the contrast), and their spread lies under the threshold", async () => {
    using tree = makeHostTree(0);
    dataset(tree, OBAMA);
    const identity = await identityOf(tree);
    expect(identity).toMatchObject({ scored: true, photos: { one_face: 4, no_face: 0, several_faces: 0 }, notes: [] });
    expect(identity.spread).toBeLessThan(0.6);
  }, TIMEOUT_MS);

  test("photos with no face are not_scored, and why; a group photo is several_faces", async () => {
    using tree = makeHostTree(0);
    const group = groupPhoto("obama.jpg", "biden.jpg", join(tree.root, "group.png"), FACES);
    dataset(tree, { "a.png": solidPng(64, 64, [10, 120, 200]), "b.png": solidPng(64, 64, [200, 20, 20]), "c.jpg": "obama.jpg" });
    copyFileSync(group, join(tree.dataset, "d.png"));
    const identity = await identityOf(tree);
    expect(identity).toEqual({
      scored: false, reason: "too_few_single_faces", photos: { one_face: 1, no_face: 2, several_faces: 1 },
      spread: null, threshold: 0.6,
      notes: [
        { file: "a.png", note: "no_face", text: "no face" }, { file: "b.png", note: "no_face", text: "no face" },
        { file: "d.png", note: "several_faces", faces: 2, text: "2 faces" },
      ],
      text: "not scored: fewer than half the photos show one face (a pet, a product, a style?); 1 photo with one face, " +
        "2 with none, 1 with several",
    });
  }, TIMEOUT_MS);

  test("a simulated worker without [likeness] python reports the identity not_scored: scorer_missing", async () => {
    using tree = makeHostTree(0);
    dataset(tree, OBAMA);
    const identity = await identityOf(tree, "");
    expect(identity).toEqual({
      scored: false, reason: "scorer_missing", photos: { one_face: 0, no_face: 0, several_faces: 0 },
      spread: null, threshold: 0.6, notes: [],
      text: "not scored: no face scorer (lora-worker doctor's likeness line says how to add it); 0 photos with one " +
        "face, 0 with none, 0 with several",
    });
  }, TIMEOUT_MS);
});

describe('identity_check: "refuse"', () => {
  test("a photo of someone else is a 422 dataset_other_person naming it, and nothing is made", async () => {
    using tree = makeHostTree(0);
    dataset(tree, { ...OBAMA, "e.jpg": "biden.jpg", "f.jpg": "biden.jpg" });
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.5) + SCORER));
    const refused = await worker.postTrain(tree.validRequest({ identity_check: "refuse" }));
    expect(refused.status).toBe(422);
    // Both of Biden's photos at once; with two of six, each lies farther from the other five.
    expect(refused.body.detail.map((d: any) => [d.type, d.msg.split(" ")[0]])).toEqual([
      ["dataset_other_person", "e.jpg"], ["dataset_other_person", "f.jpg"],
    ]);
    expect(refused.body.detail[0].msg).toMatch(/^e\.jpg shows someone else: its face is 0\.\d+ from the mean face/);
    expect((await worker.json("/train")).body).toMatchObject({ jobs: [] });
    expect(existsSync(join(tree.state, "jobs")) ? readdirSync(join(tree.state, "jobs")) : []).toEqual([]);
    // The contrast: without the photos of Biden the same request is taken.
    for (const name of ["e.jpg", "f.jpg"]) rmSync(join(tree.dataset, name));
    const taken = await worker.postTrain(tree.validRequest({ identity_check: "refuse" }));
    expect(taken.status).toBe(200);
    await worker.request(`/train/${taken.body.worker_job_id}/cancel`, { method: "POST" });
    await untilEnded(worker, taken.body.worker_job_id);
  }, TIMEOUT_MS);
});

describe("POST /dataset/check", () => {
  test("answers the report the job's dataset.prepared holds, with no job; a second at once is 409 with Retry-After", async () => {
    using tree = makeHostTree(0);
    dataset(tree, { ...OBAMA, "e.jpg": "biden.jpg" });
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.5) + SCORER));
    const post = (body: unknown) => worker.request("/dataset/check", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
    });
    const [first, second] = await Promise.all([post(tree.validRequest()), post(tree.validRequest())]);
    const busy = first.status === 409 ? first : second;
    const answered = first.status === 409 ? second : first;
    expect([busy.status, busy.headers.get("retry-after"), ((await busy.json()) as any).reason]).toEqual([409, "10", "check_busy"]);
    expect(answered.status).toBe(200);
    const { prepared } = (await answered.json()) as any;
    expect(prepared.identity.notes).toEqual([{
      file: "e.jpg", note: "other_person", distance: expect.any(Number), threshold: 0.6, text: expect.any(String),
    }]);
    expect((await worker.json("/train")).body).toMatchObject({ jobs: [] });
    expect(readdirSync(join(tree.state, "dataset-checks"))).toEqual([]);
    // The job's own report is the same.
    expect(await identityOfJob(worker, tree)).toEqual(prepared);
  }, TIMEOUT_MS);

  test("a request POST /train refuses is refused the same, 422 with the same detail (the contrast)", async () => {
    using tree = makeHostTree(0);
    dataset(tree, OBAMA);
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.5) + SCORER));
    const bad = tree.validRequest({ tier: "nope", dataset_dir: "relative" });
    const checked = await worker.json("/dataset/check", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(bad),
    });
    const trained = await worker.postTrain(bad);
    expect(checked.status).toBe(422);
    expect(checked.body).toEqual(trained.body);
  }, TIMEOUT_MS);
});

describe("[likeness] python in the config", () => {
  test("scores a simulated run's previews too: learned, through the worker's own scorer", async () => {
    using tree = makeHostTree(0);
    dataset(tree, OBAMA);
    const previews = `preview_subject = ${JSON.stringify(join(FACES, "obama2.jpg"))}\npreview_learned_at = 200\n`;
    const tables = SIMULATE_TABLES(0).replace("[gpu]", `${previews}[gpu]`);
    await using worker = await startWorker(tree.writeConfig(tables + SCORER));
    const posted = await worker.postTrain(tree.validRequest({ samples: 1 }));
    const ended = await untilEnded(worker, posted.body.worker_job_id, TIMEOUT_MS - 10_000);
    expect(ended).toMatchObject({ status: "succeeded", likeness: { verdict: "learned", best_step: 200 } });
  }, TIMEOUT_MS);
});
