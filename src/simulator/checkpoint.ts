// sd-scripts' checkpoints as a reader finds them on disk. Every --save_every_n_steps: the LoRA
// `<name>-step%08d.safetensors`, then with --save_state accelerate 1.6.0's save_state folder beside it:
// train_state.json (sd-scripts' hook), model.safetensors (the network in F32), then optimizer.bin,
// scheduler.bin, [scaler.pt with fp16,] random_states_0.pkl, each a torch.save ZIP whose End Of Central
// Directory record is its last bytes. Each file is written whole and in that order, so a folder cut short
// lacks the last ones. Then the old folder and the old LoRA go, by sd-scripts' arithmetic. At the end,
// `<name>-state` with --save_state, then the final LoRA.
import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { safetensorsParts } from "../safetensors/write.ts";
import { print, type Io, type Log } from "./io.ts";
import { finalLoraPath, networkTensors, writeLoraFile, type LoraRun } from "./lora-file.ts";

export interface Checkpoints {
  io: Io;
  log: Log;
  outputDir: string;
  // The LoRA's metadata as far as it is known before the first step.
  run: Omit<LoraRun, "steps" | "epoch" | "finishedAt">;
}

// What accelerate and sd-scripts' hook name the files of a state folder.
export const STATE_FILES = {
  trainState: "train_state.json",
  model: "model.safetensors",
  optimizer: "optimizer.bin",
  scheduler: "scheduler.bin",
  scaler: "scaler.pt",
  randomStates: "random_states_0.pkl",
};
// sd-scripts' names when --output_name is absent: DEFAULT_STEP_NAME, DEFAULT_LAST_OUTPUT_NAME.
const STEP_NAME = "at";
const LAST_NAME = "last";
// sd-scripts prepares a train and a validation loader; neither sampler is accelerate's own, so none is saved.
const SAMPLER_FILES = ["sampler.bin", "sampler_1.bin"];
const ZIP_VERSION = 20;
const ZIP_STORED = 0;
const ZIP_LOCAL_HEADER = 0x04034b50;
const ZIP_CENTRAL_HEADER = 0x02014b50;
const ZIP_END_OF_CENTRAL_DIRECTORY = 0x06054b50;

// After the step's bar update; `step` is global_step, `epoch` the loop's 0-based epoch.
export async function saveStepCheckpoint(checkpoints: Checkpoints, step: number, epoch: number): Promise<void> {
  const { io, log, run } = checkpoints;
  const every = run.args.save_every_n_steps;
  if (every === null || step % every !== 0) return;
  const lora = stepPath(checkpoints, step, ".safetensors");
  print(io, `\nsaving checkpoint: ${lora}`);
  await writeLoraFile(lora, { ...run, steps: step, epoch, finishedAt: io.wallClock() });
  if (run.args.save_state) {
    log("INFO", "");
    log("INFO", `saving state at step ${step}`);
    await saveState(checkpoints, stepPath(checkpoints, step, "-state"), epoch + 1, step);
    await removeOldState(checkpoints, step, every);
  }
  await removeOldLora(checkpoints, step, every);
}

// A finished loop's end: save_state_on_train_end with --save_state, then the LoRA. The loop always runs to
// its last epoch, which is where sd-scripts' current_epoch stands and what it writes as ss_epoch.
export async function saveFinal(checkpoints: Checkpoints, epochs: number, step: number): Promise<void> {
  const { io, log, outputDir, run } = checkpoints;
  if (run.args.save_state) {
    log("INFO", "");
    log("INFO", "saving last state.");
    await saveState(checkpoints, join(outputDir, `${run.args.output_name ?? LAST_NAME}-state`), epochs, step);
  }
  const lora = finalLoraPath(outputDir, run.args.output_name);
  print(io, `\nsaving checkpoint: ${lora}`);
  await writeLoraFile(lora, { ...run, steps: step, epoch: epochs, finishedAt: io.wallClock() });
  log("INFO", "model saved.");
}

// accelerator.save_state, its pre-hook sd-scripts' save_model_hook.
async function saveState({ log, run }: Checkpoints, dir: string, epoch: number, step: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  log("INFO", `Saving current state to ${dir}`);
  const trainState = join(dir, STATE_FILES.trainState);
  log("INFO", `save train state to ${trainState} at epoch ${epoch} step ${step}`);
  // json.dump's default separators.
  await Bun.write(trainState, `{"current_epoch": ${epoch}, "current_step": ${step}}`);
  const model = join(dir, STATE_FILES.model);
  await Bun.write(model, new Blob(safetensorsParts(networkTensors(run.args, "F32"), { format: "pt" })));
  log("INFO", `Model weights saved in ${model}`);
  const write = async (file: string, saved: string) => {
    await Bun.write(join(dir, file), torchZip(file, step));
    log("INFO", `${saved} saved in ${join(dir, file)}`);
  };
  await write(STATE_FILES.optimizer, "Optimizer state");
  await write(STATE_FILES.scheduler, "Scheduler state");
  for (const [index, file] of SAMPLER_FILES.entries()) {
    log("INFO", `Sampler state for dataloader ${index} saved in ${join(dir, file)}`);
  }
  // accelerate keeps a GradScaler only for fp16.
  if (run.args.mixed_precision === "fp16") await write(STATE_FILES.scaler, "Gradient scaler state");
  await write(STATE_FILES.randomStates, "Random states");
}

// save_and_remove_state_stepwise: --save_last_n_steps_state, or when unset or 0 --save_last_n_steps.
async function removeOldState(checkpoints: Checkpoints, step: number, every: number): Promise<void> {
  const { save_last_n_steps_state: stateLastN, save_last_n_steps: lastN } = checkpoints.run.args;
  const keep = stateLastN || lastN;
  if (keep === null) return;
  const old = removedStep(step, keep, every);
  const dir = stepPath(checkpoints, old, "-state");
  if (old <= 0 || !existsSync(dir)) return;
  checkpoints.log("INFO", `removing old state: ${dir}`);
  await rm(dir, { recursive: true, force: true });
}

// get_remove_step_no and remove_model.
async function removeOldLora(checkpoints: Checkpoints, step: number, every: number): Promise<void> {
  const keep = checkpoints.run.args.save_last_n_steps;
  if (keep === null) return;
  const old = removedStep(step, keep, every);
  const lora = stepPath(checkpoints, old, ".safetensors");
  if (old < 0 || !existsSync(lora)) return;
  print(checkpoints.io, `removing old checkpoint: ${lora}`);
  await rm(lora, { force: true });
}

// The step saved `keep` steps before, rounded down to a saved step, in Python's arithmetic (% floors).
function removedStep(step: number, keep: number, every: number): number {
  const old = step - keep - 1;
  return old - (((old % every) + every) % every);
}

function stepPath({ outputDir, run }: Checkpoints, step: number, suffix: string): string {
  return join(outputDir, `${run.args.output_name ?? STEP_NAME}-step${String(step).padStart(8, "0")}${suffix}`);
}

// torch.save's format cut to its least: one stored entry `<stem>/data.pkl` (here the pickle of the step),
// its central directory, then the End Of Central Directory record, 22 bytes with no comment, last.
function torchZip(file: string, step: number): Uint8Array {
  // Pickle protocol 2: PROTO 2, BININT with the step, STOP.
  const data = Buffer.concat([Buffer.from([0x80, 0x02, 0x4a]), le([[step, 4]]), Buffer.from(".")]);
  const name = Buffer.from(`${file.slice(0, file.indexOf("."))}/data.pkl`);
  const sizes: Field[] = [[Bun.hash.crc32(data), 4], [data.length, 4], [data.length, 4], [name.length, 2], [0, 2]];
  // No flags, no compression, no timestamp.
  const entry: Field[] = [[ZIP_VERSION, 2], [0, 2], [ZIP_STORED, 2], [0, 2], [0, 2], ...sizes];
  const local = Buffer.concat([le([[ZIP_LOCAL_HEADER, 4], ...entry]), name, data]);
  // No comment, disk 0, no attributes, the local header at offset 0.
  const placed: Field[] = [[0, 2], [0, 2], [0, 2], [0, 4], [0, 4]];
  const central = Buffer.concat([le([[ZIP_CENTRAL_HEADER, 4], [ZIP_VERSION, 2], ...entry, ...placed]), name]);
  // Disk 0, one entry, the directory's size and offset, no comment.
  const counts: Field[] = [[0, 2], [0, 2], [1, 2], [1, 2], [central.length, 4], [local.length, 4], [0, 2]];
  return Buffer.concat([local, central, le([[ZIP_END_OF_CENTRAL_DIRECTORY, 4], ...counts])]);
}

type Field = [value: number, bytes: 2 | 4];

// ZIP's integers are little-endian.
function le(fields: Field[]): Buffer {
  const bytes = Buffer.alloc(fields.reduce((length, [, size]) => length + size, 0));
  let offset = 0;
  for (const [value, size] of fields) {
    offset = size === 2 ? bytes.writeUInt16LE(value, offset) : bytes.writeUInt32LE(value, offset);
  }
  return bytes;
}
