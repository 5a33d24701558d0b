// The simulator's own settings, read from the environment the worker gives the trainer: never
// from argv, which must stay exactly what the real trainer receives.
//   LORA_WORKER_SIMULATE_SECONDS_PER_STEP  seconds per training step, >= 0 (default 0.5)
//   LORA_WORKER_SIMULATE_FAIL              comma-separated misbehaviours (failure-plan.ts): oom@N,
//                                          nan@N, hang@N, exit@N:CODE, orphan@N, setsid-orphan@N,
//                                          ignore-sigterm
//   LORA_WORKER_SIMULATE_REPLAY_LOG        absolute path of a recorded sd-scripts log to replay
//                                          instead of simulating a run (replay.ts)
//   LORA_WORKER_SIMULATE_REPLAY_SPEED      how many times faster than the log's own clock, > 0 (default 1)
import { parseFailurePlan, type FailurePlan } from "./failure-plan.ts";

export interface Knobs {
  secondsPerStep: number;
  failures: FailurePlan;
  replay: ReplayKnobs | null;
}

export interface ReplayKnobs {
  logPath: string;
  speed: number;
}

export type KnobsResult = { ok: true; knobs: Knobs } | { ok: false; message: string };

const SECONDS_PER_STEP = "LORA_WORKER_SIMULATE_SECONDS_PER_STEP";
const FAIL = "LORA_WORKER_SIMULATE_FAIL";
export const REPLAY_LOG = "LORA_WORKER_SIMULATE_REPLAY_LOG";
const REPLAY_SPEED = "LORA_WORKER_SIMULATE_REPLAY_SPEED";
const DEFAULT_SECONDS_PER_STEP = 0.5;
const DEFAULT_REPLAY_SPEED = 1;
// A replayed log decides how the run ends; only failures that shape processes can join it.
const REPLAYABLE_STRIKES: ReadonlySet<string> = new Set(["orphan"]);

type Env = Record<string, string | undefined>;

export function readKnobs(env: Env): KnobsResult {
  const secondsPerStep = readNumber(env, SECONDS_PER_STEP, DEFAULT_SECONDS_PER_STEP, (value) => value >= 0);
  if (secondsPerStep === null) return invalid(env, SECONDS_PER_STEP, "must be a non-negative number of seconds");
  const failures = parseFailurePlan(env[FAIL] ?? "");
  if (!failures.ok) return { ok: false, message: `${FAIL}: ${failures.message}` };
  const speed = readNumber(env, REPLAY_SPEED, DEFAULT_REPLAY_SPEED, (value) => value > 0);
  if (speed === null) return invalid(env, REPLAY_SPEED, "must be a positive number");
  const logPath = env[REPLAY_LOG] ?? "";
  if (logPath === "") return { ok: true, knobs: { secondsPerStep, failures: failures.plan, replay: null } };
  if (!logPath.startsWith("/")) return invalid(env, REPLAY_LOG, "must be an absolute path");
  const clash = failures.plan.strikes.find((strike) => !REPLAYABLE_STRIKES.has(strike.kind));
  if (clash !== undefined) return { ok: false, message: `${FAIL}: ${clash.kind}@${clash.step} cannot join ${REPLAY_LOG}, whose log decides how the run ends` };
  return { ok: true, knobs: { secondsPerStep, failures: failures.plan, replay: { logPath, speed } } };
}

// Null when the value is not a finite number that `accept` allows.
function readNumber(env: Env, name: string, fallback: number, accept: (value: number) => boolean): number | null {
  const text = env[name];
  if (text === undefined) return fallback;
  const value = Number(text);
  return text.trim() !== "" && Number.isFinite(value) && accept(value) ? value : null;
}

function invalid(env: Env, name: string, rule: string): KnobsResult {
  return { ok: false, message: `${name}=${JSON.stringify(env[name])} ${rule}` };
}
