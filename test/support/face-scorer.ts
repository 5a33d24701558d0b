import { join } from "node:path";
import { createScorer } from "../../src/likeness/scorer.ts";
import { SAME_PERSON } from "../../src/likeness/points.ts";

// The tests' `[likeness] python`: the venv `scripts/setup.sh --test-tools` builds with the lock's dlib-bin and
// face-recognition-models.
export const FACE_PYTHON = join(import.meta.dir, "../../.venv-likeness/bin/python");
// Real photos from the face_recognition 1.3.0 sdist's tests/test_images (test/fixtures/faces/SOURCES.md).
export const FACES = join(import.meta.dir, "../fixtures/faces");
// The same photos at 480 px on their longer side (SOURCES.md): the face model reads them in a tenth of the time,
// for the tests that score many (a run's every preview point).
export const FACES_480 = join(FACES, "480");

// The scorer runs at nice 10 (docs/likeness.md): beside other work (the suite's other files, a busy CI host) it has
// the CPU only when that work leaves it, and a call of a second alone can take minutes. Every test that waits on it
// waits this long, and gives it bounds as long, so that a loaded host slows such a test and fails none.
export const SCORER_TEST_MS = 240_000;
export const SECONDS_PER_IMAGE = 60;

/** A worker's `[likeness]` table naming the test venv (or `python`), its bounds set for a loaded host. */
export const likenessTable = (python = FACE_PYTHON) =>
  `[likeness]\npython = ${JSON.stringify(python)}\nseconds_per_image = ${SECONDS_PER_IMAGE}\n`;

/** The product's scorer over the test venv (or `python`), its bounds set for a loaded host. */
export function testScorer(python = FACE_PYTHON) {
  return createScorer({ python, loadSeconds: 30, secondsPerImage: SECONDS_PER_IMAGE, memoryMib: 1024 });
}

/** The product's preview scoring over the test venv (or `python`), as a worker's config would choose it. */
export function realScoring(python = FACE_PYTHON) {
  return { embedder: testScorer(python).embedder, threshold: SAME_PERSON };
}

// Two photos side by side, cropped to the shorter one's height: a group photo of two real faces.
const SIDE_BY_SIDE = `import sys, dlib, numpy
a, b = (dlib.load_rgb_image(p) for p in sys.argv[1:3])
h = min(a.shape[0], b.shape[0])
dlib.save_image(numpy.ascontiguousarray(numpy.hstack([a[:h], b[:h]])), sys.argv[3])`;

/** A PNG at `out` with the faces of photos `left` and `right` of `from` side by side. */
export function groupPhoto(left: string, right: string, out: string, from = FACES): string {
  const made = Bun.spawnSync([FACE_PYTHON, "-c", SIDE_BY_SIDE, join(from, left), join(from, right), out]);
  if (made.exitCode !== 0) throw new Error(`could not compose ${out}: ${made.stderr.toString()}`);
  return out;
}
