// sdxl_train_network.py as a process: its flags, then NetworkTrainer.train() in sd-scripts'
// order, or a recorded log replayed in its place. Resolves to the exit code the Python process
// would have had.
import { basename, dirname, resolve } from "node:path";
import { ARGPARSE_ERROR_EXIT } from "./argparse.ts";
import { cacheInputs } from "./caching.ts";
import { reportDatasets } from "./dataset-report.ts";
import { batchesPerEpoch, loadDatasets, type Dataset } from "./dataset.ts";
import { print, type Io } from "./io.ts";
import type { Knobs } from "./knobs.ts";
import { createLog, type Log } from "./logger.ts";
import { finalLoraPath, writeLoraFile } from "./lora-file.ts";
import { loadModel } from "./model-loading.ts";
import { announceNetwork, announceTraining, type TrainingPlan } from "./network-setup.ts";
import * as errors from "./python-errors.ts";
import type { RecordedLine } from "./recorded-log.ts";
import { replayRun } from "./replay.ts";
import { parseScriptArgs, SCRIPT_NAME, type ScriptArgs } from "./script-argv.ts";
import { runTrainingLoop } from "./training-loop.ts";

export interface TrainerLaunch {
  io: Io;
  knobs: Knobs;
  // A recorded log to play instead of training (LORA_WORKER_SIMULATE_REPLAY_LOG).
  replay: { lines: RecordedLine[]; speed: number } | null;
  script: string;
  scriptArgs: string[];
}

interface Training {
  io: Io;
  log: Log;
  knobs: Knobs;
  args: ScriptArgs;
  scriptDir: string;
  paths: { modelPath: string; configPath: string; outputDir: string };
}

// Python's own exit status for a script it cannot open.
const CANNOT_OPEN_EXIT = 2;
const NO_DATA_MESSAGE =
  "No data found. Please verify arguments (train_data_dir must be the parent of folders with images) / 画像がありません。" +
  "引数指定を確認してください（train_data_dirには画像があるフォルダではなく、画像があるフォルダの親フォルダを指定する必要があります）";
const TEXT_ENCODER_CACHE_ASSERTION =
  "network for Text Encoder cannot be trained with caching Text Encoder outputs / Text Encoderの出力をキャッシュしながらText Encoderのネットワークを学習することはできません";

export async function runTrainer({ io, knobs, replay, script, scriptArgs }: TrainerLaunch): Promise<number> {
  if (basename(script) !== SCRIPT_NAME) {
    io.stderr(errors.cantOpenFile(resolve(script)));
    return CANNOT_OPEN_EXIT;
  }
  const parsed = parseScriptArgs(scriptArgs, () => Math.floor(Math.random() * 2 ** 32));
  if (!parsed.ok) {
    io.stderr(parsed.stderr);
    return ARGPARSE_ERROR_EXIT;
  }
  const { args } = parsed;
  const scriptDir = dirname(resolve(script));
  const { pretrained_model_name_or_path: modelPath, dataset_config: configPath, output_dir: outputDir } = args;
  if (configPath === null || modelPath === null || outputDir === null) {
    const flag = configPath === null ? "dataset_config" : modelPath === null ? "pretrained_model_name_or_path" : "output_dir";
    io.stderr(errors.noneArgumentTraceback(scriptDir, flag));
    return 1;
  }
  const log = createLog(io, args.console_log_simple);
  if (replay !== null) return replayRun({ io, log, args, outputDir, ...replay, failures: knobs.failures });
  return train({ io, log, knobs, args, scriptDir, paths: { modelPath, configPath, outputDir } });
}

async function train(training: Training): Promise<number> {
  const { io, log, knobs, args, scriptDir } = training;
  const { modelPath, configPath, outputDir } = training.paths;
  const startedAt = io.wallClock();
  const datasets = await prepareDatasets(training, configPath);
  if (typeof datasets === "number") return datasets;
  if (args.cache_text_encoder_outputs && !args.network_train_unet_only) {
    io.stderr(errors.assertionTraceback(scriptDir, TEXT_ENCODER_CACHE_ASSERTION));
    return 1;
  }
  const seconds = knobs.secondsPerStep;
  const { mixed_precision: mixedPrecision, sdpa } = args;
  if (!(await loadModel({ io, log, modelPath, mixedPrecision, sdpa, scriptDir, seconds }))) return 1;
  await cacheInputs({ io, log, datasets, latents: args.cache_latents, textEncoderOutputs: args.cache_text_encoder_outputs, seconds });
  announceNetwork(io, log, args);
  const plan = trainingPlan(datasets, args.max_train_steps);
  announceTraining(io, log, plan, mixedPrecision);
  const { failures, secondsPerStep } = knobs;
  const outcome = await runTrainingLoop({ io, log, plan, seed: args.seed, secondsPerStep, failures, scriptDir });
  if (!outcome.finished) return outcome.exitCode;
  const path = finalLoraPath(outputDir, args.output_name);
  print(io, `\nsaving checkpoint: ${path}`);
  const resolution = datasets[0]!.resolution;
  await writeLoraFile(path, { args, plan, resolution, steps: outcome.steps, startedAt, finishedAt: io.wallClock() });
  log("INFO", "model saved.");
  outcome.bar.close();
  return 0;
}

// The datasets to train on, or the exit code when there are none: sd-scripts exits 0 on no data.
async function prepareDatasets({ io, log, knobs, scriptDir }: Training, configPath: string): Promise<Dataset[] | number> {
  log("INFO", `Loading dataset config from ${configPath}`);
  const loaded = await loadDatasets(configPath);
  if (!loaded.ok) {
    if (loaded.log !== null) log("ERROR", loaded.log);
    io.stderr(errors.datasetConfigTraceback(scriptDir, loaded.exception));
    return 1;
  }
  await reportDatasets(io, log, loaded.datasets, knobs.secondsPerStep);
  if (loaded.datasets.every((dataset) => dataset.trainImages === 0)) {
    log("ERROR", NO_DATA_MESSAGE);
    return 0;
  }
  return loaded.datasets;
}

function trainingPlan(datasets: Dataset[], totalSteps: number): TrainingPlan {
  const batches = batchesPerEpoch(datasets);
  return {
    trainImages: datasets.reduce((sum, dataset) => sum + dataset.trainImages, 0),
    batchesPerEpoch: batches,
    epochs: Math.ceil(totalSteps / batches),
    batchSizes: datasets.map((dataset) => dataset.batchSize),
    totalSteps,
  };
}
