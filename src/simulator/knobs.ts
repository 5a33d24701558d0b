// The simulator's own settings, read from the environment the worker gives the trainer, never from
// argv, which must stay exactly what the real trainer receives. LORA_WORKER_SIMULATE_FAIL is read with the
// grammar of config/simulate-fail.ts, so the simulator refuses exactly what the config does.
//   LORA_WORKER_SIMULATE_SECONDS_PER_STEP  seconds per training step, >= 0 (default 0.5)
//   LORA_WORKER_SIMULATE_FAIL              comma-separated misbehaviours: oom@N, nan@N, hang@N,
//                                          exit@N:CODE, orphan@N, setsid-orphan@N, sample-oom@N,
//                                          ignore-sigterm
//   LORA_WORKER_SIMULATE_REPLAY_LOG        absolute path of a recorded sd-scripts log to replay
//   LORA_WORKER_SIMULATE_REPLAY_SPEED      how many times faster than the log's own clock, > 0 (default 1)
import type { Config } from "../config/schema.ts";
import { type FailurePlan, parseFailurePlan, replayClash } from "../config/simulate-fail.ts";
import { fail, ok, type Result } from "../result.ts";

export interface Knobs {
  secondsPerStep: number;
  failures: FailurePlan;
  replay: { logPath: string; speed: number } | null;
}

type Env = Record<string, string | undefined>;

const SECONDS_PER_STEP = "LORA_WORKER_SIMULATE_SECONDS_PER_STEP";
const FAIL = "LORA_WORKER_SIMULATE_FAIL";
export const REPLAY_LOG = "LORA_WORKER_SIMULATE_REPLAY_LOG";
const REPLAY_SPEED = "LORA_WORKER_SIMULATE_REPLAY_SPEED";

/** The knobs as the worker hands them to the simulator: its `simulate` keys, in the variables readKnobs reads. */
export function simulatorEnv(simulate: Config["simulate"]): Record<string, string> {
  return {
    [SECONDS_PER_STEP]: String(simulate.seconds_per_step),
    ...(simulate.fail === "" ? {} : { [FAIL]: simulate.fail }),
    ...(simulate.replay_log === ""
      ? {}
      : { [REPLAY_LOG]: simulate.replay_log, [REPLAY_SPEED]: String(simulate.replay_speed) }),
  };
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
