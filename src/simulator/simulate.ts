// The simulated trainer: this executable standing in for `accelerate launch ... sdxl_train_network.py
// ...`, with the same argv, output and exit codes, so the worker can run end to end without a GPU.
// accelerate runs the trainer as a child and exits 1 whenever the trainer exits non-zero.
// No signal handlers, like sd-scripts: SIGTERM or SIGINT kill the run and nothing is saved, unless
// the failure plan asks for ignore-sigterm.
import { ARGPARSE_ERROR_EXIT } from "./argparse.ts";
import { processIo, type Io } from "./io.ts";
import { readKnobs, REPLAY_LOG, type Knobs } from "./knobs.ts";
import { parseLaunch } from "./launch-argv.ts";
import { calledProcessError, PYTHON } from "./python-errors.ts";
import { loadRecordedLog } from "./recorded-log.ts";
import { runTrainer, type TrainerLaunch } from "./train.ts";

const ACCELERATE_FAILURE_EXIT = 1;
const BAD_KNOB_EXIT = 2;
const TERMINATION_SIGNALS = ["SIGTERM", "SIGINT"] as const;

export async function runSimulatedLaunch(args: string[], env: Record<string, string | undefined>): Promise<number> {
  const io = processIo(env);
  const knobs = readKnobs(env);
  if (!knobs.ok) return refuseKnobs(io, knobs.message);
  const replay = await loadReplay(knobs.knobs);
  if (typeof replay === "string") return refuseKnobs(io, replay);
  // A handler, even one that does nothing, replaces the default action of dying.
  if (knobs.knobs.failures.ignoreSigterm) for (const signal of TERMINATION_SIGNALS) process.on(signal, () => {});
  return simulateLaunch(args, io, knobs.knobs, replay);
}

async function simulateLaunch(args: string[], io: Io, knobs: Knobs, replay: TrainerLaunch["replay"]): Promise<number> {
  const launch = parseLaunch(args);
  if (!launch.ok) {
    io.stderr(launch.stderr);
    return ARGPARSE_ERROR_EXIT;
  }
  const { script, scriptArgs, defaultsWarning } = launch.launch;
  if (defaultsWarning !== null) io.stderr(`${defaultsWarning}\n`);
  const exitCode = await runTrainer({ io, knobs, replay, script, scriptArgs });
  if (exitCode === 0) return 0;
  io.stderr(calledProcessError([PYTHON, script, ...scriptArgs], exitCode));
  return ACCELERATE_FAILURE_EXIT;
}

// The recorded log to replay, null when there is none, or why it cannot be read.
async function loadReplay(knobs: Knobs): Promise<TrainerLaunch["replay"] | string> {
  if (knobs.replay === null) return null;
  const loaded = await loadRecordedLog(knobs.replay.logPath);
  if (!loaded.ok) return `${REPLAY_LOG}: ${loaded.message}`;
  return { lines: loaded.lines, speed: knobs.replay.speed };
}

function refuseKnobs(io: Io, message: string): number {
  io.stderr(`lora-worker simulate: ${message}\n`);
  return BAD_KNOB_EXIT;
}
