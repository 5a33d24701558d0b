// What a simulated run saves, as supervisor/checkpoints.ts finds it on disk. The LoRA: tensors shaped as a few
// SDXL U-Net attention layers at the requested rank, and sd-scripts' `ss_*` metadata, marked so it can never pass
// for a real LoRA. Every --save_every_n_steps: the LoRA `<name>-step%08d.safetensors`, then with --save_state
// accelerate 1.6.0's save_state folder beside it: train_state.json (sd-scripts' hook), model.safetensors (the
// network), then optimizer.bin, scheduler.bin, random_states_0.pkl, each a ZIP whose End Of Central Directory
// record is its last bytes, as torch.save's are. Each file is written whole and in that order, so a folder cut
// short lacks the last ones. Then the old folder and the old LoRA go, by sd-scripts' arithmetic. At the end,
// `<name>-state` with --save_state, then the final LoRA.
import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import { safetensorsParts, writeSafetensors, type Tensor } from "../safetensors/write.ts";
import { DEFAULT_NETWORK_DIM, type ScriptArgs } from "./argv.ts";
import { print, seededRandom, type Trainer } from "./io.ts";
import type { TrainingPlan } from "./stages.ts";
import { MODEL_STATE, TORCH_ARCHIVES, TRAIN_STATE } from "./state-files.ts";

// A handful of real SDXL LoRA modules: [name, in features, out features].
const MODULES: ReadonlyArray<[string, number, number]> = [
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q", 640, 640],
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_k", 640, 640],
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn2_to_k", 2048, 640],
];
// Trained LoRA weights stay small: down projections near Kaiming scale, up projections near zero.
const UP_SCALE = 0.01;
// sd-scripts' names when --output_name is absent: DEFAULT_STEP_NAME, DEFAULT_LAST_OUTPUT_NAME.
const [STEP_NAME, LAST_NAME] = ["at", "last"];
// --save_precision: what the LoRA's tensors are stored as; without it, the network's own fp32.
const LORA_DTYPE = { fp16: "F16", bf16: "BF16", float: "F32" } as const;
// An empty ZIP: nothing but its End Of Central Directory record ("PK\5\6", no entries, no comment). It is what the
// worker checks of torch.save's archives; nothing ever loads them.
const EMPTY_ZIP = Buffer.from(`504b0506${"00".repeat(18)}`, "hex");

export function finalLoraPath(outputDir: string, outputName: string | null): string {
  return join(outputDir, `${outputName ?? LAST_NAME}.safetensors`);
}

// ss_epoch: sd-scripts passes the loop's 0-based epoch for a checkpoint every N steps, the epoch count at the end.
export async function writeLoraFile({ args }: Trainer, path: string, plan: TrainingPlan, steps: number, epoch: number) {
  await mkdir(dirname(path), { recursive: true });
  const dtype = LORA_DTYPE[(args.save_precision ?? "float") as keyof typeof LORA_DTYPE];
  await writeSafetensors(path, networkTensors(args, dtype), loraMetadata(args, plan, steps, epoch));
}

// After the step's bar update; `step` is global_step, `epoch` the loop's 0-based epoch.
export async function saveStepCheckpoint(trainer: Trainer, plan: TrainingPlan, step: number, epoch: number) {
  const { io, args } = trainer;
  if (args.save_every_n_steps === null || step % args.save_every_n_steps !== 0) return;
  const lora = stepPath(trainer, step, ".safetensors");
  print(io, `\nsaving checkpoint: ${lora}`);
  await writeLoraFile(trainer, lora, plan, step, epoch);
  if (args.save_state) {
    // The worker follows the state this line names until it is whole.
    print(io, `\nsaving state at step ${step}`);
    await saveState(trainer, stepPath(trainer, step, "-state"), epoch + 1, step);
    // save_and_remove_state_stepwise keeps --save_last_n_steps_state, or when unset or 0 --save_last_n_steps.
    await removeOld(trainer, step, args.save_last_n_steps_state || args.save_last_n_steps, "-state");
  }
  // get_remove_step_no and remove_model.
  await removeOld(trainer, step, args.save_last_n_steps, ".safetensors");
}

// A finished loop's end: save_state_on_train_end with --save_state, then the LoRA. The loop always runs to
// its last epoch, which is where sd-scripts' current_epoch stands and what it writes as ss_epoch.
export async function saveFinal(trainer: Trainer, plan: TrainingPlan, step: number): Promise<void> {
  const { io, args, outputDir } = trainer;
  const state = join(outputDir, `${args.output_name ?? LAST_NAME}-state`);
  if (args.save_state) {
    // sd-scripts logs it on a line of its own below the bar.
    print(io, "\nsaving last state.");
    await saveState(trainer, state, plan.epochs, step);
  }
  const lora = finalLoraPath(outputDir, args.output_name);
  print(io, `\nsaving checkpoint: ${lora}`);
  await writeLoraFile(trainer, lora, plan, step, plan.epochs);
  print(io, "model saved.");
}

// The network's weights, the same in the LoRA (at --save_precision) and in accelerate's saved state (fp32).
function networkTensors(args: ScriptArgs, dtype: "F16" | "BF16" | "F32"): Tensor[] {
  const random = seededRandom(args.seed);
  const rank = args.network_dim ?? DEFAULT_NETWORK_DIM;
  const tensor = (name: string, shape: number[], value: () => number): Tensor => {
    const values = Float32Array.from({ length: shape.reduce((product, size) => product * size, 1) }, value);
    return { name, dtype, shape, data: encodeFloats(values, dtype) };
  };
  const tensors = MODULES.flatMap(([module, inputs, outputs]) => [
    tensor(`${module}.alpha`, [], () => args.network_alpha),
    tensor(`${module}.lora_down.weight`, [rank, inputs], () => (random() * 2 - 1) / Math.sqrt(inputs)),
    tensor(`${module}.lora_up.weight`, [outputs, rank], () => (random() * 2 - 1) * UP_SCALE),
  ]);
  return tensors.toSorted((a, b) => (a.name < b.name ? -1 : 1));
}

function encodeFloats(values: Float32Array, dtype: "F16" | "BF16" | "F32"): Uint8Array {
  if (dtype === "F32") return new Uint8Array(values.buffer);
  if (dtype === "F16") return new Uint8Array(Float16Array.from(values).buffer);
  // bfloat16 is the top half of a float32, rounded to nearest even.
  const bits = new Uint32Array(values.buffer);
  const halves = Uint16Array.from(bits, (b) => (b + 0x7fff + ((b >>> 16) & 1)) >>> 16);
  return new Uint8Array(halves.buffer);
}

// sd-scripts stores every value as Python's str() of it; the ones nothing here knows or reads are left out.
function loraMetadata(args: ScriptArgs, plan: TrainingPlan, steps: number, epoch: number): Record<string, string> {
  return {
    ss_output_name: args.output_name ?? "None",
    ss_num_train_images: String(plan.trainImages),
    ss_max_train_steps: String(args.max_train_steps),
    ss_network_module: args.network_module ?? "None",
    ss_network_dim: String(args.network_dim ?? "None"),
    ss_network_alpha: Number.isInteger(args.network_alpha) ? args.network_alpha.toFixed(1) : String(args.network_alpha),
    ss_base_model_version: "sdxl_base_v1-0",
    ss_seed: String(args.seed),
    ss_steps: String(steps),
    ss_epoch: String(epoch),
    ss_tag_frequency: JSON.stringify(plan.tagFrequency),
    ss_max_token_length: args.max_token_length ?? "None",
    "modelspec.architecture": "stable-diffusion-xl-v1-base/lora",
    // sai_model_spec.build_metadata: the title defaults to the output name; a trigger phrase only when given.
    "modelspec.title": args.metadata_title ?? args.output_name ?? "None",
    ...(args.metadata_trigger_phrase === null ? {} : { "modelspec.trigger_phrase": args.metadata_trigger_phrase }),
    lora_worker_simulated: "true",
  };
}

// accelerator.save_state, its pre-hook sd-scripts' save_model_hook, each file announced once written, in accelerate
// 1.6.0's words. The samplers' files are announced and never written: sd-scripts' samplers are not accelerate's own.
async function saveState({ io, args }: Trainer, dir: string, epoch: number, step: number): Promise<void> {
  print(io, `Saving current state to ${dir}`);
  await mkdir(dir, { recursive: true });
  // json.dump's default separators.
  const trainState = join(dir, TRAIN_STATE);
  await Bun.write(trainState, `{"current_epoch": ${epoch}, "current_step": ${step}}`);
  print(io, `save train state to ${trainState} at epoch ${epoch} step ${step}`);
  const model = safetensorsParts(networkTensors(args, "F32"), { format: "pt" });
  await Bun.write(join(dir, MODEL_STATE), new Blob(model));
  print(io, `Model weights saved in ${join(dir, MODEL_STATE)}`);
  const [optimizer, scheduler, randomStates] = TORCH_ARCHIVES.map((file) => join(dir, file)) as [
    string, string, string,
  ];
  const archives: Array<[string, string]> = [[optimizer, "Optimizer state"], [scheduler, "Scheduler state"]];
  for (const [path, what] of archives) {
    await Bun.write(path, EMPTY_ZIP);
    print(io, `${what} saved in ${path}`);
  }
  print(io, `Sampler state for dataloader 0 saved in ${join(dir, "sampler.bin")}`);
  print(io, `Sampler state for dataloader 1 saved in ${join(dir, "sampler_1.bin")}`);
  await Bun.write(randomStates, EMPTY_ZIP);
  print(io, `Random states saved in ${randomStates}`);
}

// The step saved `keep` steps before, rounded down to a saved step, in Python's arithmetic (% floors), goes, said
// as sd-scripts says it when it is there.
async function removeOld(trainer: Trainer, step: number, keep: number | null, suffix: string): Promise<void> {
  const every = trainer.args.save_every_n_steps ?? 1;
  const old = keep === null ? 0 : step - keep - 1;
  const saved = old - (((old % every) + every) % every);
  const path = stepPath(trainer, saved, suffix);
  if (saved <= 0 || !existsSync(path)) return;
  print(trainer.io, `removing old ${suffix === "-state" ? "state" : "checkpoint"}: ${path}`);
  await rm(path, { recursive: true, force: true });
}

function stepPath({ outputDir, args }: Trainer, step: number, suffix: string): string {
  return join(outputDir, `${args.output_name ?? STEP_NAME}-step${String(step).padStart(8, "0")}${suffix}`);
}
