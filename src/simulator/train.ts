// sdxl_train_network.py as a process: its flags, then NetworkTrainer.train() in sd-scripts' order, or a
// recorded log replayed in its place. Resolves to the exit code the Python process would have had.
import { basename, resolve } from "node:path";
import { ARGPARSE_ERROR_EXIT, parseScriptArgs, SCRIPT_NAME, type ScriptArgs } from "./argv.ts";
import { saveFinal, saveStepCheckpoint } from "./checkpoint.ts";
import { createLog, type Io, type Log } from "./io.ts";
import type { Knobs } from "./knobs.ts";
import { cantOpenFile, PATH_NOT_GIVEN, traceback } from "./python.ts";
import type { RecordedLine } from "./recorded-log.ts";
import { replayRun } from "./replay.ts";
import { loadState, logSkippedEpochs, resumePoint } from "./resume.ts";
import { sampleImages } from "./samples.ts";
import { announceTraining, cacheInputs, loadDatasets, loadModel, type Dataset } from "./stages.ts";
import { runTrainingLoop, type TrainingPlan } from "./training-loop.ts";

export interface TrainerLaunch {
  io: Io;
  knobs: Knobs;
  // A recorded log to play instead of training (LORA_WORKER_SIMULATE_REPLAY_LOG).
  replay: { lines: RecordedLine[]; speed: number } | null;
  script: string;
  scriptArgs: string[];
}

// Python's own exit status for a script it cannot open.
const CANNOT_OPEN_EXIT = 2;
const NO_DATA =
  "No data found. Please verify arguments (train_data_dir must be the parent of folders with images) / 画像がありません。" +
  "引数指定を確認してください（train_data_dirには画像があるフォルダではなく、画像があるフォルダの親フォルダを指定する必要があります）";
const TEXT_ENCODER_CACHED =
  "AssertionError: network for Text Encoder cannot be trained with caching Text Encoder outputs / " +
  "Text Encoderの出力をキャッシュしながらText Encoderのネットワークを学習することはできません";

export async function runTrainer({ io, knobs, replay, script, scriptArgs }: TrainerLaunch): Promise<number> {
  if (basename(script) !== SCRIPT_NAME) {
    io.stderr(cantOpenFile(resolve(script)));
    return CANNOT_OPEN_EXIT;
  }
  const parsed = parseScriptArgs(scriptArgs, () => Math.floor(Math.random() * 2 ** 32));
  if (!parsed.ok) {
    io.stderr(parsed.error);
    return ARGPARSE_ERROR_EXIT;
  }
  const args = parsed.value;
  const { dataset_config: configPath, pretrained_model_name_or_path: modelPath, output_dir: outputDir } = args;
  if (configPath === null || modelPath === null || outputDir === null) {
    io.stderr(traceback(PATH_NOT_GIVEN));
    return 1;
  }
  const log = createLog(io, args.console_log_simple);
  if (replay !== null) return replayRun({ io, log, args, outputDir, ...replay, failures: knobs.failures });
  return train(io, log, knobs, args, { configPath, modelPath, outputDir });
}

type Paths = { configPath: string; modelPath: string; outputDir: string };

async function train(io: Io, log: Log, knobs: Knobs, args: ScriptArgs, paths: Paths): Promise<number> {
  const startedAt = io.wallClock();
  log("INFO", `Loading dataset config from ${paths.configPath}`);
  const datasets = await loadDatasets(paths.configPath, args.caption_extension);
  if (!datasets.ok) {
    io.stderr(traceback(datasets.error));
    return 1;
  }
  // sd-scripts returns normally when it finds no images.
  if (datasets.value.every((dataset) => dataset.trainImages === 0)) {
    log("ERROR", NO_DATA);
    return 0;
  }
  if (args.cache_text_encoder_outputs && !args.network_train_unet_only) {
    io.stderr(traceback(TEXT_ENCODER_CACHED));
    return 1;
  }
  if (!(await loadModel(io, log, paths.modelPath, knobs.secondsPerStep))) return 1;
  await cacheInputs(io, log, datasets.value, args, knobs.secondsPerStep);
  const resumed = args.resume === null ? 0 : loadState(io, log, args.resume, args.mixed_precision);
  if (resumed === null) return 1;
  const plan = trainingPlan(datasets.value, args.max_train_steps);
  announceTraining(io, plan);
  const start = resumePoint(io, log, plan, resumed, args.skip_until_initial_step);
  if (start === null) return 1;
  const sampling = { io, log, args, outputDir: paths.outputDir, secondsPerImage: knobs.secondsPerStep, failures: knobs.failures };
  const first = await sampleImages(sampling, 0, "first");
  if (typeof first === "object") return first.exitCode;
  logSkippedEpochs(log, plan, start);
  const tagFrequency = Object.assign({}, ...datasets.value.map((d) => d.tagFrequency));
  const run = { args, plan, resolution: datasets.value[0]!.resolution, tagFrequency, startedAt };
  const checkpoints = { io, log, outputDir: paths.outputDir, run };
  const sample = (step: number) => sampleImages(sampling, step, "step");
  const afterStep = (step: number, epoch: number) => saveStepCheckpoint(checkpoints, step, epoch);
  const outcome = await runTrainingLoop(io, { plan, start, seed: args.seed, knobs, sample, afterStep });
  if (!outcome.finished) return outcome.exitCode;
  await saveFinal(checkpoints, plan.epochs, outcome.steps);
  outcome.bar.close();
  return 0;
}

// One bucket per dataset (the simulator does not look inside images), so every batch is full but the last.
function trainingPlan(datasets: Dataset[], totalSteps: number): TrainingPlan {
  const batches = datasets.reduce((sum, dataset) => sum + Math.ceil(dataset.trainImages / dataset.batchSize), 0);
  return {
    trainImages: datasets.reduce((sum, dataset) => sum + dataset.trainImages, 0),
    batchesPerEpoch: batches,
    epochs: Math.ceil(totalSteps / batches),
    batchSizes: datasets.map((dataset) => dataset.batchSize),
    totalSteps,
  };
}
