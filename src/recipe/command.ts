import { dirname, join } from "node:path";
import { TRAIN_SCRIPT, type Config } from "../config/schema.ts";
import type { JobDir } from "../job-dir/job-dir.ts";
import { type DatasetReport, LONGEST_WINDOW, ONE_WINDOW, type TokenWindow } from "../job.ts";
import type { CheckedTrain } from "../request/check.ts";
import { TIERS } from "../tiers.ts";
import { CAPTION_EXTENSION } from "../request/dataset.ts";
import { datasetToml } from "./dataset-toml.ts";
import { SAMPLE_SAMPLER, saveEvery, sampleEvery, samplePrompts } from "./samples.ts";
import { JOB_MARKER_ENV } from "../os/proc.ts";
import { tokenizerDir } from "../tokenizers/layout.ts";
import type { Trainer } from "../trainer/trainer.ts";

// The system's directories on a child's PATH, after the venv's: the trainer, and doctor's checks as it runs them.
export const BASE_PATH = "/usr/local/bin:/usr/bin:/bin";

// Every training constant of the recipe, in one auditable place (SPEC §4); docs/recipe.md gives each one's source.
const LEARNING_RATE = "1e-4";
const LR_SCHEDULER = "cosine";
const LR_WARMUP_STEPS = 0;
const OPTIMIZER = "AdamW8bit";
const MIN_SNR_GAMMA = 5;
// SDXL base's own (sd-scripts' docs/train_network_advanced.md); 0.1 on every step was 2.8 times that.
const NOISE_OFFSET = 0.0357;
const MIXED_PRECISION = "bf16";
const SAVE_PRECISION = "fp16";
const NETWORK_MODULE = "networks.lora";
const DATA_LOADER_WORKERS = 1;
// Alpha at half the rank keeps the LoRA's effective scale at 0.5, kohya's usual SDXL choice.
const NETWORK_ALPHA_RATIO = 0.5;
// The context of a run whose record names none: its worker trained every caption on three CLIP windows.
const CONTEXT_BEFORE_CHOICE: TokenWindow = LONGEST_WINDOW;

/**
 * The context a job's runs train on: the one its preparation chose (dataset/caption-plan.ts), which a resume, on
 * the same copy, keeps; a job prepared by an older worker, or with no report, trained on the longest.
 */
export function trainedWindow(report: DatasetReport | null | undefined): TokenWindow {
  return report?.token_window?.tokens ?? CONTEXT_BEFORE_CHOICE;
}

/** A resumed run: the state it starts from, and how many times the dataset's repeats are taken (dataset-toml.ts). */
export interface ResumeFrom {
  state: string;
  step: number;
  repeatsScale: number;
}

/** Which GPU the trainer sees: set here by this host's backend, or taken from the job's environment on Slurm. */
export interface GpuPlacement {
  env: Record<string, string>;
  inheritEnv?: string[];
}

interface LaunchPlan {
  argv: string[];
  env: Record<string, string>;
  // What the trainer takes from the job's environment (on Slurm, the GPUs Slurm names).
  inheritEnv?: string[];
  cwd: string;
  dataset_toml: string;
  // The JSON prompts file of a run that takes preview samples; absent without samples.
  sample_prompts?: string;
}

// Without --num_processes 1 accelerate goes multi-GPU when two GPUs are visible.
export const LAUNCH_FLAGS = [
  "--num_processes=1",
  "--num_machines=1",
  `--mixed_precision=${MIXED_PRECISION}`,
  "--dynamo_backend=no",
  "--num_cpu_threads_per_process=1",
];

// `trainer` says what runs the command, where, and what its environment adds; the command itself is the same.
export function buildLaunch(
  train: CheckedTrain,
  config: Config,
  paths: JobDir,
  trainer: Trainer,
  gpu: GpuPlacement,
  window: TokenWindow,
  resume: ResumeFrom | null = null,
): LaunchPlan {
  const sdScripts = config.trainer.sd_scripts_dir;
  const script = [join(sdScripts, TRAIN_SCRIPT), ...scriptFlags(train, paths, config, window), ...resumeFlags(resume)];
  const samples = (train.request.samples ?? 0) > 0;
  return {
    argv: [...trainer.command, "launch", ...LAUNCH_FLAGS, ...script],
    env: { ...childEnv(config, paths, gpu), ...trainer.env },
    ...(gpu.inheritEnv === undefined ? {} : { inheritEnv: gpu.inheritEnv }),
    cwd: trainer.cwd(paths.dir),
    dataset_toml: datasetToml(train, paths.dataset, resume?.repeatsScale ?? 1),
    ...(samples ? { sample_prompts: JSON.stringify(samplePrompts(train.request), null, 2) } : {}),
  };
}

function scriptFlags(train: CheckedTrain, paths: JobDir, config: Config, window: TokenWindow): string[] {
  const { request } = train;
  const tier = TIERS[request.tier];
  const valued: Array<[string, string | number]> = [
    ["pretrained_model_name_or_path", train.baseModel],
    // Offline (HF_HUB_OFFLINE) the CLIP tokenizers load only from here.
    ["tokenizer_cache_dir", tokenizerDir(config)],
    ["dataset_config", paths.datasetConfig],
    // The job's private run directory: the worker publishes the verified LoRA into arbo's output_dir.
    ["output_dir", paths.run],
    ["output_name", request.output_name],
    ["save_model_as", "safetensors"],
    ["save_precision", SAVE_PRECISION],
    ["network_module", NETWORK_MODULE],
    ["network_dim", tier.networkDim],
    ["network_alpha", tier.networkDim * NETWORK_ALPHA_RATIO],
    // The LoRA's modelspec.* header names it and its trigger for the UIs that load it (sai_model_spec.py).
    ["metadata_title", request.output_name],
    ["metadata_trigger_phrase", request.trigger],
  ];
  const training: Array<[string, string | number]> = [
    ["learning_rate", LEARNING_RATE],
    ["unet_lr", LEARNING_RATE],
    ["optimizer_type", OPTIMIZER],
    ["lr_scheduler", LR_SCHEDULER],
    ["lr_warmup_steps", LR_WARMUP_STEPS],
    ["max_train_steps", tier.maxTrainSteps],
    ["seed", request.seed],
    ["mixed_precision", MIXED_PRECISION],
  ];
  return [
    ...valued.map(flag),
    "--network_train_unet_only",
    ...training.map(flag),
    "--gradient_checkpointing",
    "--sdpa",
    "--cache_latents",
    "--cache_latents_to_disk",
    "--cache_text_encoder_outputs",
    flag(["min_snr_gamma", MIN_SNR_GAMMA]),
    flag(["noise_offset", NOISE_OFFSET]),
    ...contextFlags(window),
    flag(["max_data_loader_n_workers", DATA_LOADER_WORKERS]),
    "--persistent_data_loader_workers",
    "--console_log_simple",
    flag(["caption_extension", CAPTION_EXTENSION]),
    ...checkpointFlags(saveEvery(tier, (request.samples ?? 0) > 0)),
    ...sampleFlags(request.samples ?? 0, tier.maxTrainSteps, paths.samplePrompts),
  ];
}

// sd-scripts trains on one CLIP window without the flag, and accepts only the longer contexts with it.
function contextFlags(window: TokenWindow): string[] {
  return window === ONE_WINDOW ? [] : [flag(["max_token_length", window])];
}

// Previews at a few points of the run and at its end (recipe/samples.ts); sd-scripts draws them before it saves a
// state due at the same step. None without samples.
function sampleFlags(samples: number, maxTrainSteps: number, promptsFile: string): string[] {
  if (samples === 0) return [];
  return [
    flag(["sample_every_n_steps", sampleEvery(maxTrainSteps)]),
    flag(["sample_prompts", promptsFile]),
    flag(["sample_sampler", SAMPLE_SAMPLER]),
  ];
}

// Every run is resumable: a state and an intermediate LoRA every K steps. sd-scripts removes the one saved
// K steps before once the next is saved (train_util.get_remove_step_no: step - (K-1) - 1, rounded down to a
// multiple of K), so only the newest of each is kept; the state's count overrides the LoRA's for states.
function checkpointFlags(every: number): string[] {
  const keepNewest = every - 1;
  return [
    flag(["save_every_n_steps", every]),
    "--save_state",
    flag(["save_last_n_steps", keepNewest]),
    flag(["save_last_n_steps_state", keepNewest]),
  ];
}

// Without the skip flag sd-scripts restarts global_step at 0 and trains every step again.
function resumeFlags(resume: ResumeFrom | null): string[] {
  return resume === null ? [] : [flag(["resume", resume.state]), "--skip_until_initial_step"];
}

// One argv element per value: argparse cannot read a value as a flag name.
function flag([name, value]: [string, string | number]): string {
  return `--${name}=${value}`;
}

function childEnv(config: Config, paths: JobDir, gpu: GpuPlacement): Record<string, string> {
  return {
    PATH: `${dirname(config.trainer.accelerate)}:${BASE_PATH}`,
    HOME: config.state_dir,
    LANG: "C.UTF-8",
    CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    ...gpu.env,
    PYTHONUNBUFFERED: "1",
    HF_HOME: paths.hfHome,
    HF_HUB_OFFLINE: "1",
    // The job's tmp folder through a short link (job-dir/tmp-link.ts): Python's sockets fit whatever state_dir is.
    TMPDIR: paths.tmp,
    [JOB_MARKER_ENV]: paths.id,
  };
}
