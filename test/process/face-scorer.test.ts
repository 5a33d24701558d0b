import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createScorer } from "../../src/likeness/scorer.ts";
import { faceDistance, SAME_PERSON } from "../../src/likeness/points.ts";
import { encodePng } from "../../src/png.ts";
import { waitFor } from "../support/wait.ts";
import { FACE_PYTHON, FACES, groupPhoto, SCORER_TEST_MS, testScorer } from "../support/face-scorer.ts";

// The product's scorer program, in the test venv's Python (dlib-bin and face-recognition-models at the lock's
// versions), on the face_recognition 1.3.0 sdist's photos.
const dir = mkdtempSync(join(tmpdir(), "lora-worker-scorer-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const face = (name: string) => join(FACES, name);

describe("the face scorer", () => {
  test("answers each image in order: one face with its box, score and embedding; none; several; a bad file", async () => {
    const blank = join(dir, "blank.png");
    writeFileSync(blank, encodePng(64, 64, () => [200, 200, 200]));
    const broken = join(dir, "broken.jpg");
    writeFileSync(broken, "not a jpeg");
    const group = groupPhoto("obama.jpg", "biden.jpg", join(dir, "group.png"));
    const scored = await testScorer().score([face("obama.jpg"), blank, group, broken]);
    if (!scored.ok) throw new Error(scored.error.detail);
    const [obama, none, both, bad] = scored.value;
    if (!obama || !("faces" in obama) || !none || !("faces" in none) || !both || !("faces" in both)) {
      throw new Error(`unexpected answer ${JSON.stringify(scored.value).slice(0, 400)}`);
    }
    expect(obama.faces).toHaveLength(1);
    expect(obama.faces[0]!.box).toEqual([349, 142, 617, 409]);
    expect(obama.faces[0]!.score).toBeGreaterThan(0);
    expect(obama.faces[0]!.embedding).toHaveLength(128);
    expect(none.faces).toEqual([]);
    expect(both.faces).toHaveLength(2);
    expect(bad).toEqual({ error: expect.stringContaining("Unknown image file format") });
  }, SCORER_TEST_MS);

  test("the previews real sd-scripts drew with random SDXL weights show no face: a real run's likeness is not_scored", async () => {
    // test/fixtures/real/SOURCES.md: the smoke run's two previews at step 6 (trigger and class prompts), 256 px.
    const real = ["trigger", "class"].map((p) => join(import.meta.dir, `../fixtures/real/sdscripts-cpu-smoke-preview-${p}-1.png`));
    const scored = await testScorer().score([...real, face("obama2.jpg")]);
    if (!scored.ok) throw new Error(scored.error.detail);
    const faces = scored.value.map((image) => ("faces" in image ? image.faces.length : image.error));
    // Contrast: a photo in the same call is found.
    expect(faces).toEqual([0, 0, 1]);
  }, SCORER_TEST_MS);

  test("one person's photos lie within dlib's threshold, two people's beyond it (the contrast)", async () => {
    const scored = await testScorer().embedder.embed([face("obama.jpg"), face("obama2.jpg"), face("biden.jpg")]);
    if (!scored.ok) throw new Error(scored.error.detail);
    const [a, b, c] = scored.value.map((faces) => faces[0]!);
    expect(faceDistance(a!, b!)).toBeLessThan(SAME_PERSON);
    expect(faceDistance(a!, c!)).toBeGreaterThan(SAME_PERSON);
  }, SCORER_TEST_MS);

  test("a Python without dlib is scorer_missing, with the import error", async () => {
    const bare = Bun.which("python3");
    if (bare === null) throw new Error("python3 is not on PATH");
    const scored = await createScorer({ python: bare, loadSeconds: 30, secondsPerImage: 10, memoryMib: 1024 })
      .score([face("obama.jpg")]);
    expect(scored).toEqual({ ok: false, error: { reason: "scorer_missing", detail: expect.stringContaining("dlib") } });
  }, SCORER_TEST_MS);

  test("a scorer past its time is killed and answered scorer_failed; calls wait their turn", async () => {
    // A Python that hangs, and says so when it starts while the one before it still lives.
    const [slow, pid, overlap] = [join(dir, "slow-python"), join(dir, "pid"), join(dir, "overlap")] as const;
    const check = `[ -f ${pid} ] && kill -0 "$(cat ${pid})" 2>/dev/null && echo yes >> ${overlap}`;
    writeFileSync(slow, `#!/bin/sh\n${check}\necho $$ > ${pid}\nexec sleep 30\n`);
    chmodSync(slow, 0o755);
    const scorer = createScorer({ python: slow, loadSeconds: 0.5, secondsPerImage: 0.5, memoryMib: 1024 });
    const calls = [scorer.score([face("obama.jpg")]), scorer.score([face("obama.jpg")])];
    const fault = { ok: false as const, error: { reason: "scorer_failed" as const, detail: "the face scorer was killed after 1 s" } };
    expect(await Promise.all(calls)).toEqual([fault, fault]);
    expect(existsSync(overlap)).toBe(false);
    // The contrast: two scorers of their own run at once, and the second sees the first.
    const apart = () => createScorer({ python: slow, loadSeconds: 0.5, secondsPerImage: 0.5, memoryMib: 1024 });
    rmSync(pid);
    const first = apart().score([face("obama.jpg")]);
    await waitFor(() => existsSync(pid), "the first scorer's pid");
    await Promise.all([first, apart().score([face("obama.jpg")])]);
    expect(existsSync(overlap)).toBe(true);
  }, 30_000);

  test("the venv the tests score with is the lock's", () => {
    const freeze = Bun.spawnSync([FACE_PYTHON, "-m", "pip", "freeze"]).stdout.toString();
    expect(freeze).toContain("dlib-bin==20.0.1.post1");
    expect(freeze).toContain("face_recognition_models==0.3.0");
  });
});
