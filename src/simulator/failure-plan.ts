// Misbehaviours a test can ask of the simulated trainer through LORA_WORKER_SIMULATE_FAIL, one
// table row per form. Each strikes at training step N (1-based), before that step completes.

export type Failure =
  | { kind: "oom"; step: number }
  | { kind: "nan"; step: number }
  | { kind: "exit"; step: number; code: number }
  | { kind: "hang"; step: number };

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
];

const MAX_EXIT_CODE = 255;

export type FailureParse = { ok: true; failure: Failure } | { ok: false; message: string };

export function parseFailure(text: string): FailureParse {
  for (const form of FORMS) {
    const match = form.pattern.exec(text);
    if (match === null) continue;
    const [step, extra] = [Number(match[1]), Number(match[2] ?? 0)];
    if (step < 1) return { ok: false, message: `step in ${JSON.stringify(text)} must be at least 1` };
    if (extra > MAX_EXIT_CODE) return { ok: false, message: `exit code in ${JSON.stringify(text)} must be 0-${MAX_EXIT_CODE}` };
    return { ok: true, failure: form.build(step, extra) };
  }
  const syntaxes = FORMS.map((form) => form.syntax).join(", ");
  return { ok: false, message: `${JSON.stringify(text)} is not one of ${syntaxes}` };
}
