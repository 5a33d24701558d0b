// The simulated trainer: this executable standing in for `accelerate launch ... sdxl_train_network.py
// ...`, with the same argv, output and exit codes, so the worker can run end to end without a GPU.
// accelerate runs the trainer as a child and exits 1 whenever the trainer exits non-zero.
// No signal handlers, like sd-scripts: SIGTERM or SIGINT kill the run and nothing is saved.
import { ARGPARSE_ERROR_EXIT } from "./argparse.ts";
import { processIo, type Io } from "./io.ts";
import { readKnobs } from "./knobs.ts";
import { parseLaunch } from "./launch-argv.ts";
import { calledProcessError, PYTHON } from "./python-errors.ts";
import { runTrainer } from "./train.ts";

const ACCELERATE_FAILURE_EXIT = 1;
const BAD_KNOB_EXIT = 2;

export async function runSimulatedLaunch(args: string[], env: Record<string, string | undefined>): Promise<number> {
  return simulateLaunch(args, env, processIo());
}

async function simulateLaunch(args: string[], env: Record<string, string | undefined>, io: Io): Promise<number> {
  const knobs = readKnobs(env);
  if (!knobs.ok) {
    io.stderr(`lora-worker simulate: ${knobs.message}\n`);
    return BAD_KNOB_EXIT;
  }
  const launch = parseLaunch(args);
  if (!launch.ok) {
    io.stderr(launch.stderr);
    return ARGPARSE_ERROR_EXIT;
  }
  const { script, scriptArgs, defaultsWarning } = launch.launch;
  if (defaultsWarning !== null) io.stderr(`${defaultsWarning}\n`);
  const exitCode = await runTrainer({ io, knobs: knobs.knobs, script, scriptArgs });
  if (exitCode === 0) return 0;
  io.stderr(calledProcessError([PYTHON, script, ...scriptArgs], exitCode));
  return ACCELERATE_FAILURE_EXIT;
}
