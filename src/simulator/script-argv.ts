// The flags of sd-scripts' sdxl_train_network.py that the worker passes, with sd-scripts' types,
// choices and defaults. Field names mirror sd-scripts' argparse namespace.
import { formatArgparseError, parseOptions, type OptionSpec } from "./argparse.ts";

export interface ScriptArgs {
  pretrained_model_name_or_path: string | null;
  dataset_config: string | null;
  output_dir: string | null;
  output_name: string | null;
  network_module: string | null;
  network_dim: number | null;
  network_alpha: number;
  network_train_unet_only: boolean;
  learning_rate: number;
  optimizer_type: string;
  lr_scheduler: string;
  max_train_steps: number;
  seed: number;
  mixed_precision: string;
  sdpa: boolean;
  cache_latents: boolean;
  cache_text_encoder_outputs: boolean;
  console_log_simple: boolean;
}

export type ScriptArgsResult = { ok: true; args: ScriptArgs } | { ok: false; stderr: string };

export const SCRIPT_NAME = "sdxl_train_network.py";

const SWITCH: OptionSpec = { kind: "switch" };
const str: OptionSpec = { kind: "value", type: "str" };
const int: OptionSpec = { kind: "value", type: "int" };
const float: OptionSpec = { kind: "value", type: "float" };

const SCRIPT_OPTIONS: Record<string, OptionSpec> = {
  console_log_simple: SWITCH,
  pretrained_model_name_or_path: str,
  dataset_config: str,
  output_dir: str,
  output_name: str,
  save_model_as: { kind: "value", type: "str", choices: [null, "ckpt", "pt", "safetensors"] },
  save_precision: { kind: "value", type: "str", choices: [null, "float", "fp16", "bf16"] },
  network_module: str,
  network_dim: int,
  network_alpha: float,
  network_train_unet_only: SWITCH,
  learning_rate: float,
  unet_lr: float,
  optimizer_type: str,
  lr_scheduler: str,
  lr_warmup_steps: { kind: "value", type: "int_or_float" },
  max_train_steps: int,
  seed: int,
  mixed_precision: { kind: "value", type: "str", choices: ["no", "fp16", "bf16"] },
  gradient_checkpointing: SWITCH,
  sdpa: SWITCH,
  cache_latents: SWITCH,
  cache_latents_to_disk: SWITCH,
  cache_text_encoder_outputs: SWITCH,
  min_snr_gamma: float,
  noise_offset: float,
  max_data_loader_n_workers: int,
  persistent_data_loader_workers: SWITCH,
  caption_extension: str,
};

// `randomSeed` stands in for sd-scripts' random.randint(0, 2**32) when --seed is absent.
export function parseScriptArgs(args: string[], randomSeed: () => number): ScriptArgsResult {
  const parsed = parseOptions(args, SCRIPT_OPTIONS, false);
  if (!parsed.ok) return { ok: false, stderr: formatArgparseError(SCRIPT_NAME, SCRIPT_OPTIONS, [], parsed.message) };
  const values = parsed.values;
  const text = (name: string) => (values.has(name) ? String(values.get(name)) : null);
  const number = (name: string) => (values.has(name) ? Number(values.get(name)) : null);
  const flag = (name: string) => values.get(name) === true;
  return {
    ok: true,
    args: {
      pretrained_model_name_or_path: text("pretrained_model_name_or_path"),
      dataset_config: text("dataset_config"),
      output_dir: text("output_dir"),
      output_name: text("output_name"),
      network_module: text("network_module"),
      network_dim: number("network_dim"),
      network_alpha: number("network_alpha") ?? 1,
      network_train_unet_only: flag("network_train_unet_only"),
      learning_rate: number("learning_rate") ?? 2e-6,
      optimizer_type: text("optimizer_type") ?? "",
      lr_scheduler: text("lr_scheduler") ?? "constant",
      max_train_steps: number("max_train_steps") ?? 1600,
      seed: number("seed") ?? randomSeed(),
      mixed_precision: text("mixed_precision") ?? "no",
      sdpa: flag("sdpa"),
      cache_latents: flag("cache_latents"),
      cache_text_encoder_outputs: flag("cache_text_encoder_outputs"),
      console_log_simple: flag("console_log_simple"),
    },
  };
}
