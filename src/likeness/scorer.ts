import { dirname, join } from "node:path";
import { z } from "zod";
import type { Config } from "../config/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import type { FaceEmbedder, ScorerFault } from "./points.ts";
import SCORER_PROGRAM from "./score-faces.py" with { type: "text" };

// The program's exit when dlib or face_recognition_models cannot be imported.
const EXIT_MISSING = 3;

const Face = z.object({
  box: z.tuple([z.number(), z.number(), z.number(), z.number()]),
  score: z.number(),
  embedding: z.array(z.number()).length(128),
});
export type Face = z.infer<typeof Face>;
const Answer = z.union([
  z.object({ images: z.array(z.union([z.object({ faces: z.array(Face) }), z.object({ error: z.string() })])) }),
  z.object({ missing: z.string() }),
]);
/** One image as the scorer saw it: its faces, or why it could not be read. */
export type ScoredPhoto = { faces: Face[] } | { error: string };

export interface ScorerSettings {
  python: string;
  /** Seconds a call may take before its first image: loading the models. */
  loadSeconds: number;
  /** Seconds a call may take per image, past the models' load; then it is killed. */
  secondsPerImage: number;
  /** The scorer's address space, set by the program itself (RLIMIT_AS). */
  memoryMib: number;
}

export type Scorer = ReturnType<typeof createScorer>;

/**
 * The face scorer in its own process (the worker loads no model): one call at a time, on the CPU only, niced,
 * bounded in time (killed past it) and in memory. A bad image, no face, several faces are answers, per image.
 */
export function createScorer(settings: ScorerSettings) {
  let queue: Promise<unknown> = Promise.resolve();
  const score = (paths: readonly string[]): Promise<Result<ScoredPhoto[], ScorerFault>> => {
    const turn = queue.then(() => scoreNow(settings, paths));
    queue = turn.catch(() => {});
    return turn;
  };
  const embedder: FaceEmbedder = {
    async embed(paths) {
      const scored = await score(paths);
      if (!scored.ok) return scored;
      return ok(scored.value.map((photo) => ("faces" in photo ? photo.faces.map((f) => f.embedding) : [])));
    },
  };
  return { score, embedder, python: settings.python };
}

/** How the scorer is run on `paths`: its argv, environment and deadline. */
export function scorerLaunch(settings: ScorerSettings, paths: readonly string[]) {
  const { python, loadSeconds, secondsPerImage, memoryMib } = settings;
  return {
    argv: [python, "-c", SCORER_PROGRAM, String(memoryMib * 1024 * 1024), ...paths],
    // Never a GPU: the scorer must not take memory or time from a training step.
    env: { CUDA_VISIBLE_DEVICES: "", PATH: "/usr/bin:/bin", PYTHONDONTWRITEBYTECODE: "1" },
    timeoutMs: (loadSeconds + secondsPerImage * paths.length) * 1000,
  };
}

/** How a scorer's process ended, as the worker or doctor's service account saw it. */
export interface ScorerEnd {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** What a scorer run on `count` images answered, or why it did not. */
export function readScorer(python: string, end: ScorerEnd, count: number, timeoutMs: number) {
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(end.stdout);
  } catch {}
  const answer = Answer.safeParse(parsed);
  if (end.exitCode === EXIT_MISSING && answer.success && "missing" in answer.data) {
    const detail = `${python} lacks the face model: ${answer.data.missing}`;
    return fail<ScorerFault>({ reason: "scorer_missing", detail });
  }
  if (end.timedOut) {
    const detail = `the face scorer was killed after ${timeoutMs / 1000} s`;
    return fail<ScorerFault>({ reason: "scorer_failed", detail });
  }
  if (end.exitCode !== 0 || !answer.success || !("images" in answer.data) || answer.data.images.length !== count) {
    const last = end.stderr.trim().split("\n").at(-1) ?? "";
    const detail = `the face scorer exited ${end.exitCode ?? "by signal"}: ${last}`;
    return fail<ScorerFault>({ reason: "scorer_failed", detail });
  }
  return ok(answer.data.images);
}

type Scored = Result<ScoredPhoto[], ScorerFault>;

async function scoreNow(settings: ScorerSettings, paths: readonly string[]): Promise<Scored> {
  const { argv, env, timeoutMs } = scorerLaunch(settings, paths);
  let proc;
  try {
    const pipes = { stdin: "ignore", stdout: "pipe", stderr: "pipe" } as const;
    proc = Bun.spawn(argv, { ...pipes, env, timeout: timeoutMs, killSignal: "SIGKILL" });
  } catch (err) {
    return fail({ reason: "scorer_missing", detail: `${settings.python} cannot be run: ${(err as Error).message}` });
  }
  const [stdout, stderr, exitCode] = [await proc.stdout.text(), await proc.stderr.text(), await proc.exited];
  const end = { exitCode, stdout, stderr, timedOut: proc.signalCode === "SIGKILL" };
  return readScorer(settings.python, end, paths.length, timeoutMs);
}

/** The Python that runs the scorer: `[likeness] python`, else the one beside `trainer.accelerate` (the trainer's
 * venv); in simulate mode without the key, none. */
export function scorerPython(config: Config): string | null {
  if (config.likeness.python !== "") return config.likeness.python;
  return config.trainer.mode === "simulate" ? null : join(dirname(config.trainer.accelerate), "python");
}

/** The worker's scorer as its config names it, or null (no Python for it in simulate mode). */
export function scorerFor(config: Config): Scorer | null {
  const python = scorerPython(config);
  if (python === null) return null;
  const { seconds_per_image: secondsPerImage, memory_mib: memoryMib } = config.likeness;
  // Loading dlib's three models takes under a second warm; a cold page cache, a few.
  return createScorer({ python, loadSeconds: 30, secondsPerImage, memoryMib });
}
