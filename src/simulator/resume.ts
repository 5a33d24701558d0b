// --resume as accelerate 1.6.0's load_state and sd-scripts' load hook read a saved state folder, and where
// train_network.py then starts its loop. With --skip_until_initial_step sd-scripts skips whole epochs and
// restarts global_step at the steps left over, step mod batches per epoch (its issue #1999, unfixed while
// PR #1406 stays open): reproduced as it is, since the worker must live with it.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { STATE_FILES } from "./checkpoint.ts";
import type { Io, Log } from "./io.ts";
import { pyRepr, pyStrRepr, traceback } from "./python.ts";
import type { TrainingPlan } from "./training-loop.ts";

// The loop's first epoch (0-based) and global_step, which is also how many batches it skips in that epoch;
// `skipped` is the saved step with --skip_until_initial_step, else 0.
export interface ResumePoint {
  epoch: number;
  initialStep: number;
  skipped: number;
}

// accelerate loads torch's file when the safetensors one is absent.
const TORCH_MODEL = "pytorch_model.bin";
const NOT_FOUND = "FileNotFoundError: [Errno 2] No such file or directory:";
const STEPS_LEFT_ASSERTION =
  "AssertionError: max_train_steps should be greater than initial step / max_train_stepsは初期ステップより大きい必要があります";

// The step train_state.json records (0 without one), or null once the exception's traceback is on stderr.
export function loadState(io: Io, log: Log, dir: string, mixedPrecision: string): number | null {
  const raise = (exception: string) => {
    io.stderr(traceback(exception));
    return null;
  };
  log("INFO", `resume training from local state: ${dir}`);
  if (!isDirectory(dir)) return raise(`ValueError: Tried to find ${dir} but folder does not exist`);
  log("INFO", `Loading states from ${dir}`);
  const step = readTrainState(log, join(dir, STATE_FILES.trainState));
  if (typeof step === "string") return raise(step);
  const model = existsSync(join(dir, STATE_FILES.model)) ? STATE_FILES.model : TORCH_MODEL;
  const loads: [file: string | null, loaded: string][] = [
    [model, "All model weights loaded successfully"],
    [STATE_FILES.optimizer, "All optimizer states loaded successfully"],
    [STATE_FILES.scheduler, "All scheduler states loaded successfully"],
    // No sampler file: sd-scripts' samplers are not accelerate's own (checkpoint.ts).
    [null, "All dataloader sampler states loaded successfully"],
  ];
  if (mixedPrecision === "fp16") loads.push([STATE_FILES.scaler, "GradScaler state loaded successfully"]);
  for (const [file, loaded] of loads) {
    if (file !== null && !existsSync(join(dir, file))) return raise(`${NOT_FOUND} ${pyStrRepr(join(dir, file))}`);
    log("INFO", loaded);
  }
  // accelerate swallows any failure to restore the random states.
  const random = existsSync(join(dir, STATE_FILES.randomStates));
  log("INFO", random ? "All random states loaded successfully" : "Could not load random states");
  log("INFO", "Loading in 0 custom states");
  return step;
}

// train_network.py's initial_step and epoch_to_start, with its log lines before --sample_at_first's samples.
export function resumePoint(io: Io, log: Log, plan: TrainingPlan, step: number, skip: boolean): ResumePoint | null {
  if (step <= 0) return { epoch: 0, initialStep: 0, skipped: 0 };
  if (plan.totalSteps <= step) {
    io.stderr(traceback(`${STEPS_LEFT_ASSERTION}: ${plan.totalSteps} vs ${step}`));
    return null;
  }
  const epoch = Math.floor(step / plan.batchesPerEpoch);
  // Without --skip_until_initial_step only the epoch number moves on: global_step starts at 0 again.
  if (!skip) return { epoch, initialStep: 0, skipped: 0 };
  log("INFO", `skipping ${step} steps / ${step}ステップをスキップします`);
  return { epoch, initialStep: step - epoch * plan.batchesPerEpoch, skipped: step };
}

// The training loop's first lines, after --sample_at_first's samples: each whole epoch a resumed run skips.
export function logSkippedEpochs(log: Log, plan: TrainingPlan, { epoch, skipped }: ResumePoint): void {
  for (let index = 0; skipped > 0 && index < epoch; index += 1) {
    const left = skipped - index * plan.batchesPerEpoch;
    log("INFO", `skipping epoch ${index + 1} because initial_step (multiplied) is ${left}`);
  }
}

// load_model_hook: current_step, or the exception json.load raises, or a KeyError for a missing or non-integer step.
function readTrainState(log: Log, path: string): number | string {
  if (!existsSync(path)) return 0;
  let state: unknown;
  try {
    state = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    return `json.decoder.JSONDecodeError: ${(error as Error).message}`;
  }
  const step = (state as { current_step?: unknown } | null)?.current_step;
  if (!Number.isInteger(step)) return "KeyError: 'current_step'";
  log("INFO", `load train state from ${path}: ${pyRepr(state)}`);
  return step as number;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
