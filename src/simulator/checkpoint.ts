// What a simulated run saves, as a reader finds it on disk. The LoRA: tensors shaped as a few SDXL U-Net
// attention layers at the requested rank, and sd-scripts' `ss_*` metadata, marked so it can never pass for a
// real LoRA. Every --save_every_n_steps: the LoRA `<name>-step%08d.safetensors`, then with --save_state
// accelerate 1.6.0's save_state folder beside it: train_state.json (sd-scripts' hook), model.safetensors (the
// network in F32), then optimizer.bin, scheduler.bin, random_states_0.pkl, each a torch.save ZIP whose End Of
// Central Directory record is its last bytes. Each file is written whole and in that order, so a folder cut
// short lacks the last ones. Then the old folder and the old LoRA go, by sd-scripts' arithmetic. At the end,
// `<name>-state` with --save_state, then the final LoRA.
import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { safetensorsParts, writeSafetensors, type Tensor } from "../safetensors/write.ts";
import { DEFAULT_NETWORK_DIM, type ScriptArgs } from "./argv.ts";
import { print, pyFloatStr, seededRandom, type Trainer } from "./io.ts";
import type { TrainingPlan } from "./stages.ts";

// The LoRA's metadata as far as it is known before the first step.
export interface RunFacts {
  plan: TrainingPlan;
  resolution: [number, number];
  tagFrequency: Record<string, Record<string, number>>;
  startedAt: number;
}

// What accelerate and sd-scripts' hook name the files of a state folder.
export const STATE_FILES = {
  trainState: "train_state.json",
  model: "model.safetensors",
  optimizer: "optimizer.bin",
  scheduler: "scheduler.bin",
  randomStates: "random_states_0.pkl",
};
// A handful of real SDXL LoRA modules: [name, in features, out features].
const MODULES: ReadonlyArray<[string, number, number]> = [
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q", 640, 640],
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_k", 640, 640],
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn2_to_k", 2048, 640],
];
// Trained LoRA weights stay small: down projections near Kaiming scale, up projections near zero.
const UP_SCALE = 0.01;
// sd-scripts' names when --output_name is absent: DEFAULT_STEP_NAME, DEFAULT_LAST_OUTPUT_NAME.
const STEP_NAME = "at";
const LAST_NAME = "last";
// sd-scripts prepares a train and a validation loader; neither sampler is accelerate's own, so none is saved.
const SAMPLER_FILES = ["sampler.bin", "sampler_1.bin"];
const ZIP_VERSION = 20;
const ZIP_LOCAL_HEADER = 0x04034b50;
const ZIP_CENTRAL_HEADER = 0x02014b50;
const ZIP_END_OF_CENTRAL_DIRECTORY = 0x06054b50;

export function finalLoraPath(outputDir: string, outputName: string | null): string {
  return join(outputDir, `${outputName ?? LAST_NAME}.safetensors`);
}

// ss_epoch: sd-scripts passes the loop's 0-based epoch for a checkpoint every N steps, the epoch count at the end.
export async function writeLoraFile(trainer: Trainer, path: string, run: RunFacts, steps: number, epoch: number) {
  await mkdir(dirname(path), { recursive: true });
  const metadata = loraMetadata(trainer.args, run, steps, epoch, trainer.io.wallClock());
  await writeSafetensors(path, networkTensors(trainer.args, "F16"), metadata);
}

// After the step's bar update; `step` is global_step, `epoch` the loop's 0-based epoch.
export async function saveStepCheckpoint(trainer: Trainer, run: RunFacts, step: number, epoch: number): Promise<void> {
  const { io, log, args } = trainer;
  const every = args.save_every_n_steps;
  if (every === null || step % every !== 0) return;
  const lora = stepPath(trainer, step, ".safetensors");
  print(io, `\nsaving checkpoint: ${lora}`);
  await writeLoraFile(trainer, lora, run, step, epoch);
  // save_and_remove_state_stepwise keeps --save_last_n_steps_state, or when unset or 0 --save_last_n_steps.
  const keepStates = args.save_last_n_steps_state || args.save_last_n_steps;
  if (args.save_state) {
    log("INFO", "");
    log("INFO", `saving state at step ${step}`);
    await saveState(trainer, stepPath(trainer, step, "-state"), epoch + 1, step);
    const old = keepStates === null ? 0 : removedStep(step, keepStates, every);
    const dir = stepPath(trainer, old, "-state");
    if (old > 0 && existsSync(dir)) {
      log("INFO", `removing old state: ${dir}`);
      await rm(dir, { recursive: true, force: true });
    }
  }
  // get_remove_step_no and remove_model.
  const old = args.save_last_n_steps === null ? -1 : removedStep(step, args.save_last_n_steps, every);
  const oldLora = stepPath(trainer, old, ".safetensors");
  if (old >= 0 && existsSync(oldLora)) {
    print(io, `removing old checkpoint: ${oldLora}`);
    await rm(oldLora, { force: true });
  }
}

// A finished loop's end: save_state_on_train_end with --save_state, then the LoRA. The loop always runs to
// its last epoch, which is where sd-scripts' current_epoch stands and what it writes as ss_epoch.
export async function saveFinal(trainer: Trainer, run: RunFacts, step: number): Promise<void> {
  const { io, log, args, outputDir } = trainer;
  if (args.save_state) {
    log("INFO", "");
    log("INFO", "saving last state.");
    await saveState(trainer, join(outputDir, `${args.output_name ?? LAST_NAME}-state`), run.plan.epochs, step);
  }
  const lora = finalLoraPath(outputDir, args.output_name);
  print(io, `\nsaving checkpoint: ${lora}`);
  await writeLoraFile(trainer, lora, run, step, run.plan.epochs);
  log("INFO", "model saved.");
}

// The network's weights, the same whatever the dtype: the saved LoRA is F16, accelerate's saved state F32.
function networkTensors(args: ScriptArgs, dtype: "F16" | "F32"): Tensor[] {
  const random = seededRandom(args.seed);
  const rank = args.network_dim ?? DEFAULT_NETWORK_DIM;
  const tensor = (name: string, shape: number[], value: () => number): Tensor => {
    const count = shape.reduce((product, size) => product * size, 1);
    const view = new DataView(new ArrayBuffer(count * (dtype === "F16" ? 2 : 4)));
    for (let index = 0; index < count; index += 1) {
      if (dtype === "F16") view.setFloat16(index * 2, value(), true);
      else view.setFloat32(index * 4, value(), true);
    }
    return { name, dtype, shape, data: new Uint8Array(view.buffer) };
  };
  const tensors = MODULES.flatMap(([module, inputs, outputs]) => [
    tensor(`${module}.alpha`, [], () => args.network_alpha),
    tensor(`${module}.lora_down.weight`, [rank, inputs], () => (random() * 2 - 1) / Math.sqrt(inputs)),
    tensor(`${module}.lora_up.weight`, [outputs, rank], () => (random() * 2 - 1) * UP_SCALE),
  ]);
  return tensors.toSorted((a, b) => (a.name < b.name ? -1 : 1));
}

// sd-scripts stores every value as Python's str() of it.
function loraMetadata(args: ScriptArgs, run: RunFacts, steps: number, epoch: number, finishedAt: number) {
  const { plan, resolution: [width, height] } = run;
  const pyStr = (value: string | number | null) => (value === null ? "None" : String(value));
  return {
    ss_training_started_at: pyFloatStr(run.startedAt),
    ss_output_name: pyStr(args.output_name),
    ss_learning_rate: pyFloatStr(args.learning_rate),
    ss_num_train_images: String(plan.trainImages),
    ss_num_batches_per_epoch: String(plan.batchesPerEpoch),
    ss_num_epochs: String(plan.epochs),
    ss_max_train_steps: String(args.max_train_steps),
    ss_lr_scheduler: args.lr_scheduler,
    ss_network_module: pyStr(args.network_module),
    ss_network_dim: pyStr(args.network_dim),
    ss_network_alpha: pyFloatStr(args.network_alpha),
    ss_mixed_precision: args.mixed_precision,
    ss_base_model_version: "sdxl_base_v1-0",
    ss_seed: String(args.seed),
    ss_optimizer: args.optimizer_type,
    ss_resolution: `(${width}, ${height})`,
    ss_training_finished_at: pyFloatStr(finishedAt),
    ss_steps: String(steps),
    ss_epoch: String(epoch),
    ss_tag_frequency: JSON.stringify(run.tagFrequency),
    "modelspec.architecture": "stable-diffusion-xl-v1-base/lora",
    lora_worker_simulated: "true",
  };
}

// accelerator.save_state, its pre-hook sd-scripts' save_model_hook.
async function saveState({ log, args }: Trainer, dir: string, epoch: number, step: number): Promise<void> {
  await mkdir(dir, { recursive: true });
  log("INFO", `Saving current state to ${dir}`);
  const trainState = join(dir, STATE_FILES.trainState);
  log("INFO", `save train state to ${trainState} at epoch ${epoch} step ${step}`);
  // json.dump's default separators.
  await Bun.write(trainState, `{"current_epoch": ${epoch}, "current_step": ${step}}`);
  const model = join(dir, STATE_FILES.model);
  await Bun.write(model, new Blob(safetensorsParts(networkTensors(args, "F32"), { format: "pt" })));
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
  await write(STATE_FILES.randomStates, "Random states");
}

// The step saved `keep` steps before, rounded down to a saved step, in Python's arithmetic (% floors).
function removedStep(step: number, keep: number, every: number): number {
  const old = step - keep - 1;
  return old - (((old % every) + every) % every);
}

function stepPath({ outputDir, args }: Trainer, step: number, suffix: string): string {
  return join(outputDir, `${args.output_name ?? STEP_NAME}-step${String(step).padStart(8, "0")}${suffix}`);
}

// torch.save's format cut to its least: one stored entry `<stem>/data.pkl` (the pickle of the step: PROTO 2,
// BININT, STOP) with no flags, compression or timestamp, its central directory, then the End Of Central
// Directory record, 22 bytes with no comment, last. ZIP's integers are little-endian.
function torchZip(file: string, step: number): Buffer {
  const data = Buffer.concat([Buffer.from([0x80, 0x02, 0x4a]), le([[step, 4]]), Buffer.from(".")]);
  const name = Buffer.from(`${file.slice(0, file.indexOf("."))}/data.pkl`);
  const sizes: Field[] = [[Bun.hash.crc32(data), 4], [data.length, 4], [data.length, 4], [name.length, 2], [0, 2]];
  const entry: Field[] = [[ZIP_VERSION, 2], [0, 2], [0, 2], [0, 2], [0, 2], ...sizes];
  const local = Buffer.concat([le([[ZIP_LOCAL_HEADER, 4], ...entry]), name, data]);
  // No comment, disk 0, no attributes, the local header at offset 0.
  const placed: Field[] = [[0, 2], [0, 2], [0, 2], [0, 4], [0, 4]];
  const central = Buffer.concat([le([[ZIP_CENTRAL_HEADER, 4], [ZIP_VERSION, 2], ...entry, ...placed]), name]);
  // Disk 0, one entry, the directory's size and offset, no comment.
  const counts: Field[] = [[0, 2], [0, 2], [1, 2], [1, 2], [central.length, 4], [local.length, 4], [0, 2]];
  return Buffer.concat([local, central, le([[ZIP_END_OF_CENTRAL_DIRECTORY, 4], ...counts])]);
}

type Field = [value: number, bytes: 2 | 4];

function le(fields: Field[]): Buffer {
  const bytes = Buffer.alloc(fields.reduce((length, [, size]) => length + size, 0));
  let offset = 0;
  for (const [value, size] of fields) {
    offset = size === 2 ? bytes.writeUInt16LE(value, offset) : bytes.writeUInt32LE(value, offset);
  }
  return bytes;
}
