// The simulator's own settings, read from the environment the worker gives the trainer: never
// from argv, which must stay exactly what the real trainer receives.
import { parseFailure, type Failure } from "./failure-plan.ts";

export interface Knobs {
  secondsPerStep: number;
  failure: Failure | null;
}

export type KnobsResult = { ok: true; knobs: Knobs } | { ok: false; message: string };

const SECONDS_PER_STEP = "LORA_WORKER_SIMULATE_SECONDS_PER_STEP";
const FAIL = "LORA_WORKER_SIMULATE_FAIL";
const DEFAULT_SECONDS_PER_STEP = 0.5;

export function readKnobs(env: Record<string, string | undefined>): KnobsResult {
  const pace = env[SECONDS_PER_STEP];
  const secondsPerStep = pace === undefined ? DEFAULT_SECONDS_PER_STEP : Number(pace);
  if (pace?.trim() === "" || !Number.isFinite(secondsPerStep) || secondsPerStep < 0) {
    return { ok: false, message: `${SECONDS_PER_STEP}=${JSON.stringify(pace)} must be a non-negative number of seconds` };
  }
  const fail = env[FAIL];
  if (fail === undefined || fail === "") return { ok: true, knobs: { secondsPerStep, failure: null } };
  const failure = parseFailure(fail);
  if (!failure.ok) return { ok: false, message: `${FAIL}: ${failure.message}` };
  return { ok: true, knobs: { secondsPerStep, failure: failure.failure } };
}
