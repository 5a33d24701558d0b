import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPORT_MARK } from "../../src/doctor/trainer-checks.ts";
import { PYTHON_LOCK } from "../../src/trainer/lock.ts";
import { writeExecutable } from "./scratch-files.ts";

// The options sd-scripts 48d368f's sdxl_train_network parser defines among those the worker launches with (read in
// train_network.py, library/train_util.py, sdxl_train_util.py): the ones that take a value, and the switches.
export const VALUED_FLAGS = [
  "pretrained_model_name_or_path", "tokenizer_cache_dir", "dataset_config", "output_dir", "output_name",
  "save_model_as", "save_precision", "network_module", "network_dim", "network_alpha", "metadata_title",
  "metadata_trigger_phrase", "learning_rate", "unet_lr", "optimizer_type", "lr_scheduler", "lr_warmup_steps",
  "max_train_steps", "seed", "mixed_precision", "min_snr_gamma", "noise_offset", "max_token_length",
  "max_data_loader_n_workers", "caption_extension", "save_every_n_steps", "save_last_n_steps",
  "save_last_n_steps_state", "sample_every_n_steps", "sample_prompts", "sample_sampler", "resume",
];
export const SWITCHES = [
  "network_train_unet_only", "gradient_checkpointing", "sdpa", "cache_latents", "cache_latents_to_disk",
  "cache_text_encoder_outputs", "persistent_data_loader_workers", "console_log_simple", "save_state",
  "skip_until_initial_step", "masked_loss",
];
// The keys its dataset schema takes where the worker writes them (library/config_util.py's schemas).
const DATASET_KEYS = {
  general: ["caption_extension"],
  dataset: ["resolution", "batch_size", "enable_bucket", "max_bucket_reso", "subsets"],
  subset: ["image_dir", "class_tokens", "num_repeats"],
};

interface StandIn {
  /** A flag its parser lacks. */
  without?: string;
  /** A dataset key its schema refuses. */
  refusesKey?: string;
  /** Its train script raises this on import (a package it needs missing). */
  importError?: string;
  /** Its check of a run's arguments raises ValueError with this message. */
  refusesArguments?: string;
}

/** A tiny sd-scripts tree at `dir` with a real argparse parser and dataset schema, as sd-scripts' own modules
 * name them, so the venv check's program runs against it in the system's python3. */
export function writeStandInSdScripts(
  dir: string,
  { without, refusesKey, importError, refusesArguments }: StandIn = {},
): string {
  mkdirSync(join(dir, "library"), { recursive: true });
  const pyList = (names: string[]) => JSON.stringify(names.filter((name) => name !== without));
  writeFileSync(join(dir, "sdxl_train_network.py"), [
    "import argparse",
    "from library import train_util",
    ...(importError ? [`raise ModuleNotFoundError(${JSON.stringify(importError)})`] : []),
    `VALUED = ${pyList(VALUED_FLAGS)}`,
    `SWITCHES = ${pyList(SWITCHES)}`,
    "def setup_parser():",
    "    parser = argparse.ArgumentParser()",
    "    for name in VALUED: parser.add_argument('--' + name)",
    "    for name in SWITCHES: parser.add_argument('--' + name, action='store_true')",
    "    return parser",
    "",
  ].join("\n"));
  writeFileSync(join(dir, "library/__init__.py"), "");
  writeFileSync(join(dir, "library/train_util.py"),
    "def verify_command_line_training_args(args):\n    pass\ndef verify_training_args(args):\n" +
      (refusesArguments ? `    raise ValueError(${JSON.stringify(refusesArguments)})\n` : "    pass\n"));
  writeFileSync(join(dir, "library/sdxl_train_util.py"), "def verify_sdxl_training_args(args):\n    pass\n");
  const keys = Object.fromEntries(Object.entries(DATASET_KEYS).map(([k, v]) => [k, v.filter((key) => key !== refusesKey)]));
  writeFileSync(join(dir, "library/config_util.py"), [
    "import tomllib",
    `KEYS = ${JSON.stringify(keys)}`,
    "def load_user_config(file):",
    "    with open(file, 'rb') as f: return tomllib.load(f)",
    "def _only(table, allowed, where):",
    "    for key in table:",
    "        if key not in allowed: raise ValueError(f\"extra keys not allowed @ data{where}['{key}']\")",
    "class ConfigSanitizer:",
    "    def __init__(self, dreambooth, finetuning, controlnet, dropout): pass",
    "class BlueprintGenerator:",
    "    def __init__(self, sanitizer): self.sanitizer = sanitizer",
    "    def generate(self, config, args):",
    "        _only(config.get('general', {}), KEYS['general'], \"['general']\")",
    "        for i, dataset in enumerate(config['datasets']):",
    "            _only(dataset, KEYS['dataset'], f\"['datasets'][{i}]\")",
    "            for j, subset in enumerate(dataset['subsets']):",
    "                _only(subset, KEYS['subset'], f\"['datasets'][{i}]['subsets'][{j}]\")",
    "",
  ].join("\n"));
  return dir;
}

/** A venv's bin/ at `bin` whose python is the system's python3 and whose packages are reported as the lock's
 * (or as `packages` says); its accelerate answers --help. */
export function writeStandInVenv(bin: string, packages?: Record<string, string>): { python: string; accelerate: string } {
  mkdirSync(bin, { recursive: true });
  const listed = packages ?? Object.fromEntries(PYTHON_LOCK.map((pin) => [pin.name, pin.version]));
  const report = `${REPORT_MARK}${JSON.stringify(listed)}`;
  const python = writeExecutable(join(bin, "python"),
    `#!/bin/sh\ncase "$2" in *importlib.metadata*) printf '%s\\n' '${report}'; exit 0;; esac\nexec python3 "$@"\n`);
  const accelerate = writeExecutable(join(bin, "accelerate"), "#!/bin/sh\necho 'usage: accelerate <command> [<args>]'\n");
  return { python, accelerate };
}
