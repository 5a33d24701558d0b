// The simulated trainer: this executable standing in for `accelerate launch ... sdxl_train_network.py ...`,
// with the same argv, output and exit codes, so the worker can run end to end without a GPU. accelerate runs
// the trainer as a child and exits 1 whenever the trainer exits non-zero. No signal handlers, like sd-scripts:
// SIGTERM or SIGINT kill the run and nothing is saved, unless the failure plan asks for ignore-sigterm.
// NetworkTrainer.train() runs in sd-scripts' order; its loop, as seen from outside: `epoch e/E` on stdout at
// each epoch start, a `steps:` tqdm bar on stderr redrawn at every step with avr_loss, the samples then the
// checkpoints due after each step's bar update (the bar's clock paused while sampling), and the failures the
// plan asks for. A resumed loop starts where stages.ts resumePoint says, skipping batches unseen.
import { basename, resolve } from "node:path";
import type { StepFailure } from "../config/simulate-fail.ts";
import { statOrNull } from "../fs.ts";
import { ok } from "../result.ts";
import { parseLaunch, parseScriptArgs, pyStrRepr, SCRIPT_NAME } from "./argv.ts";
import { saveFinal, saveStepCheckpoint } from "./checkpoint.ts";
import { CUDA_OOM, exitWith, PATH_NOT_GIVEN, print, processIo, raise, seededRandom } from "./io.ts";
import { USAGE_EXIT, type Io, type Trainer } from "./io.ts";
import { readKnobs, type Knobs } from "./knobs.ts";
import { readRecordedLog, replayRun, type RecordedLine } from "./replay.ts";
import { sampleImages } from "./samples.ts";
import {
  announceResume, announceTraining, cacheLatents, cacheTextEncoderOutputs, loadDatasets, loadState, resumePoint,
} from "./stages.ts";
import type { StartStep, TrainingPlan } from "./stages.ts";
import { ProgressBar } from "./tqdm.ts";

// Where the training venv lives on the deployment host (SPEC §1); only named in error output.
const PYTHON = "/opt/fluxgym/.venv/bin/python";
const BAD_KNOB_EXIT = 2;
const NO_DATA =
  "No data found. Please verify arguments (train_data_dir must be the parent of folders with images) / " +
  "画像がありません。引数指定を確認してください（train_data_dirには画像があるフォルダではなく、" +
  "画像があるフォルダの親フォルダを指定する必要があります）";
const TEXT_ENCODER_CACHED =
  "AssertionError: network for Text Encoder cannot be trained with caching Text Encoder outputs / " +
  "Text Encoderの出力をキャッシュしながら" +
  "Text Encoderのネットワークを学習することはできません";
// Keeps the event loop alive while a hang is simulated.
const HANG_TICK_MS = 60_000;
// An SDXL LoRA's loss: a mean that falls early and then flattens, each step scattered 0.35x-1.65x around it.
const LOSS_FLOOR = 0.075;
const LOSS_EARLY_EXCESS = 0.045;
const LOSS_DECAY_PER_RUN = 3;

export async function runSimulatedLaunch(args: string[], env: Record<string, string | undefined>): Promise<number> {
  const io = processIo(env);
  const knobs = readKnobs(env);
  if (!knobs.ok) return exitWith(io, `lora-worker simulate: ${knobs.error}\n`, BAD_KNOB_EXIT);
  const recorded = await readRecordedLog(knobs.value.replay);
  if (!recorded.ok) return exitWith(io, `lora-worker simulate: ${recorded.error}\n`, BAD_KNOB_EXIT);
  // A handler, even one that does nothing, replaces the default action of dying.
  if (knobs.value.failures.ignoreSigterm) for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => {});
  const launch = parseLaunch(args);
  if (!launch.ok) return exitWith(io, launch.error, USAGE_EXIT);
  const { script, scriptArgs } = launch.value;
  const exitCode = await runScript(io, knobs.value, recorded.value, script, scriptArgs);
  if (exitCode === 0) return 0;
  // accelerate's simple_launcher when the trainer exits non-zero: an uncaught exception of its own.
  const command = `'[${[PYTHON, script, ...scriptArgs].map(pyStrRepr).join(", ")}]'`;
  return raise(io, `subprocess.CalledProcessError: Command ${command} returned non-zero exit status ${exitCode}.`);
}

// sdxl_train_network.py as a process, or a recorded log replayed in its place: the exit code Python would have.
async function runScript(io: Io, knobs: Knobs, recorded: RecordedLine[] | null, script: string, argv: string[]) {
  if (basename(script) !== SCRIPT_NAME) {
    const why = `can't open file ${pyStrRepr(resolve(script))}: [Errno 2] No such file or directory`;
    return exitWith(io, `${PYTHON}: ${why}\n`, USAGE_EXIT);
  }
  const parsed = parseScriptArgs(argv, () => Math.floor(Math.random() * 2 ** 32));
  if (!parsed.ok) return exitWith(io, parsed.error, USAGE_EXIT);
  const { dataset_config: configPath, pretrained_model_name_or_path: modelPath, output_dir: outputDir } = parsed.value;
  if (configPath === null || modelPath === null || outputDir === null) return raise(io, PATH_NOT_GIVEN);
  const trainer = { io, args: parsed.value, outputDir, knobs };
  if (recorded !== null) return replayRun(trainer, recorded);
  return train(trainer, configPath, modelPath);
}

async function train(trainer: Trainer, configPath: string, modelPath: string): Promise<number> {
  const { io, args, knobs } = trainer;
  const datasets = await loadDatasets(configPath, args.caption_extension);
  if (!datasets.ok) return raise(io, datasets.error);
  // sd-scripts returns normally when it finds no images.
  if (datasets.value.every((dataset) => dataset.trainImages === 0)) {
    print(io, NO_DATA);
    return 0;
  }
  if (args.cache_text_encoder_outputs && !args.network_train_unet_only) return raise(io, TEXT_ENCODER_CACHED);
  // A path that is not a file goes to diffusers as a repo id, which an absolute path can never be.
  if (!statOrNull(modelPath)?.isFile()) {
    const why = `pretrained_model_name_or_path "${modelPath}" is neither a valid local path nor a valid repo id.`;
    return raise(io, `ValueError: The provided ${why} Please check the parameter.`);
  }
  await io.sleep(knobs.secondsPerStep);
  await cacheLatents(trainer, datasets.value);
  await cacheTextEncoderOutputs(trainer, datasets.value);
  const resumed = args.resume === null ? ok({ epoch: 0, step: 0 }) : loadState(args.resume);
  if (!resumed.ok) return raise(io, resumed.error);
  if (args.resume !== null) announceResume(io, args.resume, resumed.value);
  const plan = announceTraining(io, datasets.value, args.max_train_steps);
  const start = resumePoint(io, plan, resumed.value.step, args.skip_until_initial_step);
  if (!start.ok) return raise(io, start.error);
  return trainingLoop(trainer, plan, start.value);
}

// A finished loop saves, then closes its bar: sd-scripts never closes it, so it closes when Python exits.
async function trainingLoop(trainer: Trainer, plan: TrainingPlan, start: StartStep): Promise<number> {
  const { io, args, knobs } = trainer;
  const bar = new ProgressBar(io, "steps", plan.totalSteps - start.initialStep);
  const loss = lossCurve(plan, args.seed, knobs.failures.strikes);
  let globalStep = start.initialStep;
  // The dataset's own epoch count, which set_current_epoch reports as it moves on.
  let datasetEpoch = 0;
  for (let epoch = start.epoch; epoch < plan.epochs; epoch += 1) {
    print(io, `\nepoch ${epoch + 1}/${plan.epochs}\n`);
    print(io, `epoch is incremented. current_epoch: ${datasetEpoch}, epoch: ${epoch + 1}`);
    datasetEpoch = epoch + 1;
    // skip_first_batches drops all but the last batch to skip, which enumerate() numbers 0 and the loop passes.
    const skipped = epoch === start.epoch ? start.initialStep : 0;
    const batches = plan.batchesPerEpoch - Math.max(0, skipped - 1);
    for (let step = Math.min(skipped, 1); step < batches && globalStep < plan.totalSteps; step += 1) {
      for (const failure of knobs.failures.strikes.filter((strike) => strike.step === globalStep + 1)) {
        const exitCode = await strike(io, failure, knobs.failures.ignoreSigterm, bar);
        if (exitCode !== null) return exitCode;
      }
      await io.sleep(knobs.secondsPerStep);
      bar.update();
      globalStep += 1;
      const sampled = await sampleImages(trainer, globalStep);
      if (typeof sampled === "object") {
        bar.close();
        return sampled.exitCode;
      }
      // sd-scripts unpauses after every step, but at real step times only sampling moves the clock.
      if (sampled === "sampled") bar.unpause();
      await saveStepCheckpoint(trainer, plan, globalStep, epoch);
      bar.setLoss(loss(globalStep));
    }
  }
  await saveFinal(trainer, plan, globalStep);
  bar.close();
  return 0;
}

// avr_loss, the mean of the run's losses so far (sd-scripts' LossRecorder keeps a window of one epoch after the
// first, a finer curve nothing reads); a NaN (from nan@N on) never leaves it.
function lossCurve(plan: TrainingPlan, seed: number, strikes: StepFailure[]) {
  const random = seededRandom(seed);
  const nanFrom = Math.min(...strikes.map((strike) => (strike.kind === "nan" ? strike.step : Infinity)));
  let [total, count] = [0, 0];
  return (globalStep: number): number => {
    const decay = Math.exp((-LOSS_DECAY_PER_RUN * globalStep) / Math.max(1, plan.totalSteps));
    const loss = (LOSS_FLOOR + LOSS_EARLY_EXCESS * decay) * (0.35 + 1.3 * random());
    total += globalStep >= nanFrom ? Number.NaN : loss;
    return total / ++count;
  };
}

// The exit code of a failure that ends the run, or null for one that lets it go on (nan, sample-oom: elsewhere).
async function strike(io: Io, failure: StepFailure, ignoreSigterm: boolean, bar: ProgressBar): Promise<number | null> {
  if (failure.kind === "orphan") io.spawnStray(failure.escapeGroup, ignoreSigterm);
  if (failure.kind === "exit") return failure.code;
  if (failure.kind === "hang") return new Promise<never>(() => setInterval(() => {}, HANG_TICK_MS));
  if (failure.kind !== "oom") return null;
  const exitCode = raise(io, CUDA_OOM);
  bar.close();
  return exitCode;
}
