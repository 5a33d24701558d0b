// The grammar of simulate.fail, the misbehaviours the worker hands the simulated trainer: the config checks the
// key with it and the simulator reads LORA_WORKER_SIMULATE_FAIL with it, so both refuse exactly the same plans.
import { fail, ok, type Result } from "../result.ts";

/**
 * A stepped failure strikes at training step N (1-based) before that step completes, in list order; sample-oom
 * strikes in step N's sampling instead, if there is one (simulator/samples.ts).
 */
export type StepFailure =
  | { kind: "oom" | "sample-oom" | "nan" | "hang"; step: number }
  | { kind: "exit"; step: number; code: number }
  | { kind: "orphan"; step: number; escapeGroup: boolean };

export interface FailurePlan {
  /** The trainer and everything it spawns ignore SIGTERM and SIGINT: only SIGKILL stops them. */
  ignoreSigterm: boolean;
  strikes: StepFailure[];
}

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

/** A replayed log decides how the run ends, so only strays can join it: the first failure that cannot. */
export function replayClash(plan: FailurePlan): string | null {
  const clash = plan.strikes.find((strike) => strike.kind !== "orphan");
  return clash === undefined ? null : `${clash.kind}@${clash.step}`;
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
