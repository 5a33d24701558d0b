// The simulator's own settings, read from the environment the worker gives the trainer, never from
// argv, which must stay exactly what the real trainer receives. config/schema.ts checks simulate.fail
// with parseFailurePlan and replayClash, so the config and the simulator share one grammar.
//   LORA_WORKER_SIMULATE_SECONDS_PER_STEP  seconds per training step, >= 0 (default 0.5)
//   LORA_WORKER_SIMULATE_FAIL              comma-separated misbehaviours: oom@N, nan@N, hang@N,
//                                          exit@N:CODE, orphan@N, setsid-orphan@N, sample-oom@N,
//                                          ignore-sigterm
//   LORA_WORKER_SIMULATE_REPLAY_LOG        absolute path of a recorded sd-scripts log to replay
//   LORA_WORKER_SIMULATE_REPLAY_SPEED      how many times faster than the log's own clock, > 0 (default 1)
import { fail, ok, type Result } from "../result.ts";

// A stepped failure strikes at training step N (1-based) before that step completes, in list order;
// sample-oom strikes in step N's sampling instead, if there is one (samples.ts).
export type StepFailure =
  | { kind: "oom" | "sample-oom" | "nan" | "hang"; step: number }
  | { kind: "exit"; step: number; code: number }
  | { kind: "orphan"; step: number; escapeGroup: boolean };

export interface FailurePlan {
  // The trainer and everything it spawns ignore SIGTERM and SIGINT: only SIGKILL stops them.
  ignoreSigterm: boolean;
  strikes: StepFailure[];
}

export interface Knobs {
  secondsPerStep: number;
  failures: FailurePlan;
  replay: { logPath: string; speed: number } | null;
}

type Env = Record<string, string | undefined>;
type Failure = StepFailure | { kind: "ignore-sigterm" };

// Each form's syntax is its pattern: N and CODE stand for decimal numbers.
const FORMS: ReadonlyArray<[syntax: string, build: (step: number, code: number) => Failure]> = [
  ["oom@N", (step) => ({ kind: "oom", step })],
  ["nan@N", (step) => ({ kind: "nan", step })],
  ["exit@N:CODE", (step, code) => ({ kind: "exit", step, code })],
  ["hang@N", (step) => ({ kind: "hang", step })],
  ["orphan@N", (step) => ({ kind: "orphan", step, escapeGroup: false })],
  ["setsid-orphan@N", (step) => ({ kind: "orphan", step, escapeGroup: true })],
  ["sample-oom@N", (step) => ({ kind: "sample-oom", step })],
  ["ignore-sigterm", () => ({ kind: "ignore-sigterm" })],
];
const MAX_EXIT_CODE = 255;
const LEADING_ZERO = /^0\d/;

const SECONDS_PER_STEP = "LORA_WORKER_SIMULATE_SECONDS_PER_STEP";
const FAIL = "LORA_WORKER_SIMULATE_FAIL";
export const REPLAY_LOG = "LORA_WORKER_SIMULATE_REPLAY_LOG";
const REPLAY_SPEED = "LORA_WORKER_SIMULATE_REPLAY_SPEED";

export function parseFailurePlan(text: string): Result<FailurePlan> {
  const failures: Failure[] = [];
  for (const item of text === "" ? [] : text.split(",")) {
    const parsed = parseFailure(item);
    if (!parsed.ok) return parsed;
    failures.push(parsed.value);
  }
  const strikes = failures.filter((failure): failure is StepFailure => failure.kind !== "ignore-sigterm");
  return ok({ ignoreSigterm: strikes.length < failures.length, strikes });
}

// A replayed log decides how the run ends, so only strays can join it: the first failure that cannot.
export function replayClash(plan: FailurePlan): string | null {
  const clash = plan.strikes.find((strike) => strike.kind !== "orphan");
  return clash === undefined ? null : `${clash.kind}@${clash.step}`;
}

export function readKnobs(env: Env): Result<Knobs> {
  const secondsPerStep = readNumber(env, SECONDS_PER_STEP, 0.5, (value) => value >= 0);
  if (secondsPerStep === null) return invalid(env, SECONDS_PER_STEP, "must be a non-negative number of seconds");
  const failures = parseFailurePlan(env[FAIL] ?? "");
  if (!failures.ok) return fail(`${FAIL}: ${failures.error}`);
  const speed = readNumber(env, REPLAY_SPEED, 1, (value) => value > 0);
  if (speed === null) return invalid(env, REPLAY_SPEED, "must be a positive number");
  const logPath = env[REPLAY_LOG] ?? "";
  if (logPath === "") return ok({ secondsPerStep, failures: failures.value, replay: null });
  if (!logPath.startsWith("/")) return invalid(env, REPLAY_LOG, "must be an absolute path");
  const clash = replayClash(failures.value);
  if (clash !== null) return fail(`${FAIL}: ${clash} cannot join ${REPLAY_LOG}, whose log decides how the run ends`);
  return ok({ secondsPerStep, failures: failures.value, replay: { logPath, speed } });
}

function parseFailure(text: string): Result<Failure> {
  const quoted = JSON.stringify(text);
  for (const [syntax, build] of FORMS) {
    const match = new RegExp(`^${syntax.replace(/N|CODE/g, "(\\d+)")}$`).exec(text);
    if (match === null) continue;
    const [step = "1", code = "0"] = match.slice(1);
    const padded = [step, code].some((number) => LEADING_ZERO.test(number));
    if (padded) return fail(`numbers in ${quoted} must not have leading zeros`);
    if (Number(step) < 1) return fail(`step in ${quoted} must be at least 1`);
    if (Number(code) > MAX_EXIT_CODE) return fail(`exit code in ${quoted} must be 0-${MAX_EXIT_CODE}`);
    return ok(build(Number(step), Number(code)));
  }
  return fail(`${quoted} is not one of ${FORMS.map(([syntax]) => syntax).join(", ")}`);
}

// Null when the value is not a finite number that `accept` allows.
function readNumber(env: Env, name: string, fallback: number, accept: (value: number) => boolean): number | null {
  const text = env[name];
  if (text === undefined) return fallback;
  const value = Number(text);
  return text.trim() !== "" && Number.isFinite(value) && accept(value) ? value : null;
}

function invalid(env: Env, name: string, rule: string): Result<Knobs> {
  return fail(`${name}=${JSON.stringify(env[name])} ${rule}`);
}
