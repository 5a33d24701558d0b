// The simulator's own settings, read from the environment the worker gives the trainer, never from
// argv, which must stay exactly what the real trainer receives. LORA_WORKER_SIMULATE_FAIL is read with the
// grammar of config/simulate-fail.ts, so the simulator refuses exactly what the config does.
//   LORA_WORKER_SIMULATE_SECONDS_PER_STEP  seconds per training step, >= 0 (default 0.5)
//   LORA_WORKER_SIMULATE_FAIL              comma-separated misbehaviours: oom@N, nan@N, hang@N,
//                                          exit@N:CODE, orphan@N, setsid-orphan@N, sample-oom@N,
//                                          ignore-sigterm
//   LORA_WORKER_SIMULATE_REPLAY_LOG        absolute path of a recorded sd-scripts log to replay
//   LORA_WORKER_SIMULATE_REPLAY_SPEED      how many times faster than the log's own clock, > 0 (default 1)
//   LORA_WORKER_SIMULATE_PREVIEW_SUBJECT   absolute path of a photo the previews show the subject with
//   LORA_WORKER_SIMULATE_PREVIEW_OTHER     absolute path of a photo of someone else (unset: no face)
//   LORA_WORKER_SIMULATE_PREVIEW_LEARNED_AT  the step from which the trigger's previews show the subject (0: never)
//   LORA_WORKER_SIMULATE_PREVIEW_BLEED_AT  the step from which the class's previews show the subject (0: never)
import type { Config } from "../config/schema.ts";
import { type FailurePlan, parseFailurePlan, replayClash } from "../config/simulate-fail.ts";
import { fail, ok, type Result } from "../result.ts";

/** Photos the previews are drawn from in place of one colour, so that a face scorer sees a person learned. */
export interface PreviewPhotos {
  subject: string;
  other: string | null;
  learnedAt: number;
  bleedAt: number;
}

export interface Knobs {
  secondsPerStep: number;
  failures: FailurePlan;
  replay: { logPath: string; speed: number } | null;
  previews: PreviewPhotos | null;
}

type Env = Record<string, string | undefined>;

const SECONDS_PER_STEP = "LORA_WORKER_SIMULATE_SECONDS_PER_STEP";
const FAIL = "LORA_WORKER_SIMULATE_FAIL";
export const REPLAY_LOG = "LORA_WORKER_SIMULATE_REPLAY_LOG";
const REPLAY_SPEED = "LORA_WORKER_SIMULATE_REPLAY_SPEED";
const [SUBJECT, OTHER] = ["LORA_WORKER_SIMULATE_PREVIEW_SUBJECT", "LORA_WORKER_SIMULATE_PREVIEW_OTHER"];
const [LEARNED_AT, BLEED_AT] = ["LORA_WORKER_SIMULATE_PREVIEW_LEARNED_AT", "LORA_WORKER_SIMULATE_PREVIEW_BLEED_AT"];

/** The knobs as the worker hands them to the simulator: its `simulate` keys, in the variables readKnobs reads. */
export function simulatorEnv(simulate: Config["simulate"]): Record<string, string> {
  return {
    [SECONDS_PER_STEP]: String(simulate.seconds_per_step),
    ...(simulate.fail === "" ? {} : { [FAIL]: simulate.fail }),
    ...(simulate.replay_log === ""
      ? {}
      : { [REPLAY_LOG]: simulate.replay_log, [REPLAY_SPEED]: String(simulate.replay_speed) }),
    ...previewEnv(simulate),
  };
}

function previewEnv(simulate: Config["simulate"]): Record<string, string> {
  if (simulate.preview_subject === "") return {};
  return {
    [SUBJECT]: simulate.preview_subject,
    ...(simulate.preview_other === "" ? {} : { [OTHER]: simulate.preview_other }),
    [LEARNED_AT]: String(simulate.preview_learned_at),
    [BLEED_AT]: String(simulate.preview_bleed_at),
  };
}

export function readKnobs(env: Env): Result<Knobs> {
  const secondsPerStep = readNumber(env, SECONDS_PER_STEP, 0.5, (value) => value >= 0);
  if (secondsPerStep === null) return invalid(env, SECONDS_PER_STEP, "must be a non-negative number of seconds");
  const failures = parseFailurePlan(env[FAIL] ?? "");
  if (!failures.ok) return fail(`${FAIL}: ${failures.error}`);
  const speed = readNumber(env, REPLAY_SPEED, 1, (value) => value > 0);
  if (speed === null) return invalid(env, REPLAY_SPEED, "must be a positive number");
  const previews = readPreviews(env);
  if (!previews.ok) return previews;
  const knobs = { secondsPerStep, failures: failures.value, replay: null, previews: previews.value };
  const logPath = env[REPLAY_LOG] ?? "";
  if (logPath === "") return ok(knobs);
  if (!logPath.startsWith("/")) return invalid(env, REPLAY_LOG, "must be an absolute path");
  const clash = replayClash(failures.value);
  if (clash !== null) return fail(`${FAIL}: ${clash} cannot join ${REPLAY_LOG}, whose log decides how the run ends`);
  return ok({ ...knobs, replay: { logPath, speed } });
}

function readPreviews(env: Env): Result<PreviewPhotos | null> {
  const [subject, other] = [env[SUBJECT] ?? "", env[OTHER] ?? ""];
  if (subject === "") {
    const stray = [OTHER, LEARNED_AT, BLEED_AT].find((name) => env[name] !== undefined);
    return stray === undefined ? ok(null) : fail(`${stray} needs ${SUBJECT}`);
  }
  if (!subject.startsWith("/")) return invalid(env, SUBJECT, "must be an absolute path");
  if (other !== "" && !other.startsWith("/")) return invalid(env, OTHER, "must be an absolute path");
  const step = (value: number) => Number.isInteger(value) && value >= 0;
  const learnedAt = readNumber(env, LEARNED_AT, 0, step);
  if (learnedAt === null) return invalid(env, LEARNED_AT, "must be a step, >= 0");
  const bleedAt = readNumber(env, BLEED_AT, 0, step);
  if (bleedAt === null) return invalid(env, BLEED_AT, "must be a step, >= 0");
  return ok({ subject, other: other === "" ? null : other, learnedAt, bleedAt });
}

// Null when the value is not a finite number that `accept` allows.
function readNumber(env: Env, name: string, fallback: number, accept: (value: number) => boolean): number | null {
  const text = env[name];
  if (text === undefined) return fallback;
  const value = Number(text);
  return text.trim() !== "" && Number.isFinite(value) && accept(value) ? value : null;
}

function invalid(env: Env, name: string, rule: string): { ok: false; error: string } {
  return fail(`${name}=${JSON.stringify(env[name])} ${rule}`);
}
