// The simulated trainer: this executable standing in for `accelerate launch ... sdxl_train_network.py
// ...`, with the same argv, output and exit codes, so the worker can run end to end without a GPU.
// accelerate runs the trainer as a child and exits 1 whenever the trainer exits non-zero.
// No signal handlers, like sd-scripts: SIGTERM or SIGINT kill the run and nothing is saved, unless
// the failure plan asks for ignore-sigterm.
import { readFile } from "node:fs/promises";
import { ARGPARSE_ERROR_EXIT, parseLaunch } from "./argv.ts";
import { processIo, type Io } from "./io.ts";
import { readKnobs, REPLAY_LOG, type Knobs } from "./knobs.ts";
import { calledProcessError, PYTHON } from "./python.ts";
import { parseRecordedLog } from "./recorded-log.ts";
import { runTrainer, type TrainerLaunch } from "./train.ts";

const ACCELERATE_FAILURE_EXIT = 1;
const BAD_KNOB_EXIT = 2;

export async function runSimulatedLaunch(args: string[], env: Record<string, string | undefined>): Promise<number> {
  const io = processIo(env);
  const knobs = readKnobs(env);
  if (!knobs.ok) return refuseKnobs(io, knobs.error);
  const replay = await loadReplay(knobs.value);
  if (typeof replay === "string") return refuseKnobs(io, replay);
  // A handler, even one that does nothing, replaces the default action of dying.
  if (knobs.value.failures.ignoreSigterm) for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => {});
  const launch = parseLaunch(args);
  if (!launch.ok) {
    io.stderr(launch.error);
    return ARGPARSE_ERROR_EXIT;
  }
  const { script, scriptArgs } = launch.value;
  const exitCode = await runTrainer({ io, knobs: knobs.value, replay, script, scriptArgs });
  if (exitCode === 0) return 0;
  io.stderr(calledProcessError([PYTHON, script, ...scriptArgs], exitCode));
  return ACCELERATE_FAILURE_EXIT;
}

// The recorded log to replay, null when there is none, or why it cannot be read.
async function loadReplay(knobs: Knobs): Promise<TrainerLaunch["replay"] | string> {
  if (knobs.replay === null) return null;
  try {
    return { lines: parseRecordedLog(await readFile(knobs.replay.logPath, "utf8")), speed: knobs.replay.speed };
  } catch (error) {
    return `${REPLAY_LOG}: ${(error as Error).message}`;
  }
}

function refuseKnobs(io: Io, message: string): number {
  io.stderr(`lora-worker simulate: ${message}\n`);
  return BAD_KNOB_EXIT;
}
