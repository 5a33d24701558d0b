// The file a simulated run saves: LoRA-shaped tensors for a few SDXL U-Net attention layers at the
// requested rank, and sd-scripts' `ss_*` metadata, marked so it can never pass for a real LoRA.
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { writeSafetensors, type Tensor } from "../safetensors/write.ts";
import { DEFAULT_NETWORK_DIM, type ScriptArgs } from "./argv.ts";
import { pyFloatStr } from "./python.ts";
import { seededRandom, type TrainingPlan } from "./training-loop.ts";

export interface LoraRun {
  args: ScriptArgs;
  plan: TrainingPlan;
  resolution: [number, number];
  steps: number;
  // ss_epoch: sd-scripts passes the loop's 0-based epoch for a checkpoint every N steps, the epoch count at the end.
  epoch: number;
  tagFrequency: Record<string, Record<string, number>>;
  startedAt: number;
  finishedAt: number;
}

// A handful of real SDXL LoRA modules: [name, in features, out features].
const MODULES: ReadonlyArray<[string, number, number]> = [
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q", 640, 640],
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_k", 640, 640],
  ["lora_unet_input_blocks_4_1_transformer_blocks_0_attn2_to_k", 2048, 640],
];
// Trained LoRA weights stay small: down projections near Kaiming scale, up projections near zero.
const UP_SCALE = 0.01;
const FLOAT_BYTES = { F16: 2, F32: 4 } as const;

// sd-scripts names the final file "last" when --output_name is absent.
export function finalLoraPath(outputDir: string, outputName: string | null): string {
  return join(outputDir, `${outputName ?? "last"}.safetensors`);
}

export async function writeLoraFile(path: string, run: LoraRun): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeSafetensors(path, networkTensors(run.args, "F16"), loraMetadata(run));
}

// The network's weights, the same whatever the dtype: the saved LoRA is F16, accelerate's saved state F32.
export function networkTensors(args: ScriptArgs, dtype: "F16" | "F32"): Tensor[] {
  const random = seededRandom(args.seed);
  const rank = args.network_dim ?? DEFAULT_NETWORK_DIM;
  const tensor = (name: string, shape: number[], value: () => number): Tensor => {
    const data = floats(dtype, shape.reduce((count, size) => count * size, 1), value);
    return { name, dtype, shape, data };
  };
  const tensors = MODULES.flatMap(([module, inputs, outputs]) => [
    tensor(`${module}.alpha`, [], () => args.network_alpha),
    tensor(`${module}.lora_down.weight`, [rank, inputs], () => (random() * 2 - 1) / Math.sqrt(inputs)),
    tensor(`${module}.lora_up.weight`, [outputs, rank], () => (random() * 2 - 1) * UP_SCALE),
  ]);
  return tensors.toSorted((a, b) => (a.name < b.name ? -1 : 1));
}

function floats(dtype: "F16" | "F32", count: number, value: () => number): Uint8Array {
  const bytes = new Uint8Array(count * FLOAT_BYTES[dtype]);
  const view = new DataView(bytes.buffer);
  for (let index = 0; index < count; index += 1) {
    if (dtype === "F16") view.setFloat16(index * FLOAT_BYTES.F16, value(), true);
    else view.setFloat32(index * FLOAT_BYTES.F32, value(), true);
  }
  return bytes;
}

// sd-scripts stores every value as Python's str() of it.
function loraMetadata(run: LoraRun): Record<string, string> {
  const { args, plan, resolution: [width, height], steps } = run;
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
    ss_training_finished_at: pyFloatStr(run.finishedAt),
    ss_steps: String(steps),
    ss_epoch: String(run.epoch),
    ss_tag_frequency: JSON.stringify(run.tagFrequency),
    "modelspec.architecture": "stable-diffusion-xl-v1-base/lora",
    lora_worker_simulated: "true",
  };
}
