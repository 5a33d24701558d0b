// Misbehaviours a test can ask of the simulated trainer through LORA_WORKER_SIMULATE_FAIL: a
// comma-separated list, one table row per form. A stepped failure strikes at training step N
// (1-based), before that step completes; failures striking at the same step go in list order.

export type StepFailure =
  | { kind: "oom"; step: number }
  | { kind: "nan"; step: number }
  | { kind: "exit"; step: number; code: number }
  | { kind: "hang"; step: number }
  | { kind: "orphan"; step: number; escapeGroup: boolean };

type Failure = StepFailure | { kind: "ignore-sigterm" };

export interface FailurePlan {
  // The trainer and everything it spawns ignore SIGTERM and SIGINT: only SIGKILL stops them.
  ignoreSigterm: boolean;
  strikes: StepFailure[];
}

interface Form {
  syntax: string;
  pattern: RegExp;
  build(step: number, extra: number): Failure;
}

const FORMS: readonly Form[] = [
  { syntax: "oom@N", pattern: /^oom@(\d+)$/, build: (step) => ({ kind: "oom", step }) },
  { syntax: "nan@N", pattern: /^nan@(\d+)$/, build: (step) => ({ kind: "nan", step }) },
  { syntax: "exit@N:CODE", pattern: /^exit@(\d+):(\d+)$/, build: (step, code) => ({ kind: "exit", step, code }) },
  { syntax: "hang@N", pattern: /^hang@(\d+)$/, build: (step) => ({ kind: "hang", step }) },
  { syntax: "orphan@N", pattern: /^orphan@(\d+)$/, build: (step) => ({ kind: "orphan", step, escapeGroup: false }) },
  { syntax: "setsid-orphan@N", pattern: /^setsid-orphan@(\d+)$/, build: (step) => ({ kind: "orphan", step, escapeGroup: true }) },
  { syntax: "ignore-sigterm", pattern: /^ignore-sigterm$/, build: () => ({ kind: "ignore-sigterm" }) },
];

const MAX_EXIT_CODE = 255;

export const NO_FAILURES: FailurePlan = { ignoreSigterm: false, strikes: [] };

export type FailurePlanParse = { ok: true; plan: FailurePlan } | { ok: false; message: string };
type FailureParse = { ok: true; failure: Failure } | { ok: false; message: string };

export function parseFailurePlan(text: string): FailurePlanParse {
  if (text === "") return { ok: true, plan: NO_FAILURES };
  const failures: Failure[] = [];
  for (const item of text.split(",")) {
    const parsed = parseFailure(item);
    if (!parsed.ok) return parsed;
    failures.push(parsed.failure);
  }
  const strikes = failures.filter((failure): failure is StepFailure => failure.kind !== "ignore-sigterm");
  return { ok: true, plan: { ignoreSigterm: strikes.length < failures.length, strikes } };
}

function parseFailure(text: string): FailureParse {
  for (const form of FORMS) {
    const match = form.pattern.exec(text);
    if (match === null) continue;
    const [step, extra] = [Number(match[1] ?? 1), Number(match[2] ?? 0)];
    if (step < 1) return { ok: false, message: `step in ${JSON.stringify(text)} must be at least 1` };
    if (extra > MAX_EXIT_CODE) return { ok: false, message: `exit code in ${JSON.stringify(text)} must be 0-${MAX_EXIT_CODE}` };
    return { ok: true, failure: form.build(step, extra) };
  }
  const syntaxes = FORMS.map((form) => form.syntax).join(", ");
  return { ok: false, message: `${JSON.stringify(text)} is not one of ${syntaxes}` };
}
