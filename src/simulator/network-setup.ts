// What sd-scripts prints between loading the model and the first step: the LoRA network
// (networks/lora.py), the optimizer, and the "running training" summary (train_network.py).
import { print, type Io } from "./io.ts";
import type { Log } from "./logger.ts";
import { pyFloatStr } from "./python-format.ts";
import type { ScriptArgs } from "./script-argv.ts";

export interface TrainingPlan {
  trainImages: number;
  batchesPerEpoch: number;
  epochs: number;
  batchSizes: number[];
  totalSteps: number;
}

// networks.lora falls back to rank 4 when --network_dim is absent.
export const DEFAULT_NETWORK_DIM = 4;
// Module counts networks.lora reports for SDXL's U-Net and both text encoders.
const UNET_MODULES = 722;
const TEXT_ENCODER_MODULES = 264;

const TORCH_DTYPE: Readonly<Record<string, string>> = { no: "torch.float32", fp16: "torch.float16", bf16: "torch.bfloat16" };

export function announceNetwork(io: Io, log: Log, args: ScriptArgs): void {
  print(io, `import network module: ${args.network_module}`);
  log("INFO", `create LoRA network. base dim (rank): ${args.network_dim ?? DEFAULT_NETWORK_DIM}, alpha: ${pyFloatStr(args.network_alpha)}`);
  log("INFO", "neuron dropout: p=None, rank dropout: p=None, module dropout: p=None");
  log("INFO", "create LoRA for Text Encoder 1:");
  log("INFO", "create LoRA for Text Encoder 2:");
  log("INFO", `create LoRA for Text Encoder: ${TEXT_ENCODER_MODULES} modules.`);
  log("INFO", `create LoRA for U-Net: ${UNET_MODULES} modules.`);
  if (!args.network_train_unet_only) log("INFO", `enable LoRA for text encoder: ${TEXT_ENCODER_MODULES} modules`);
  log("INFO", `enable LoRA for U-Net: ${UNET_MODULES} modules`);
  print(io, "prepare optimizer, data loader etc.");
  log("INFO", `use ${optimizerLabel(args.optimizer_type)} optimizer | {}`);
}

export function announceTraining(io: Io, log: Log, plan: TrainingPlan, mixedPrecision: string): void {
  print(io, "running training / 学習開始");
  print(io, `  num train images * repeats / 学習画像の数×繰り返し回数: ${plan.trainImages}`);
  print(io, "  num validation images * repeats / 学習画像の数×繰り返し回数: 0");
  print(io, "  num reg images / 正則化画像の数: 0");
  print(io, `  num batches per epoch / 1epochのバッチ数: ${plan.batchesPerEpoch}`);
  print(io, `  num epochs / epoch数: ${plan.epochs}`);
  print(io, `  batch size per device / バッチサイズ: ${plan.batchSizes.join(", ")}`);
  print(io, "  gradient accumulation steps / 勾配を合計するステップ数 = 1");
  print(io, `  total optimization steps / 学習ステップ数: ${plan.totalSteps}`);
  log("INFO", `unet dtype: ${TORCH_DTYPE[mixedPrecision]}, device: cuda:0`);
}

// train_util.get_optimizer: an empty --optimizer_type means AdamW.
function optimizerLabel(optimizerType: string): string {
  if (optimizerType.toLowerCase() === "adamw8bit") return "8-bit AdamW";
  return optimizerType === "" ? "AdamW" : optimizerType;
}
