// sd-scripts' training loop as seen from outside: `epoch e/E` on stdout at each epoch start, a `steps:`
// tqdm bar on stderr redrawn at every step with avr_loss, the samples then the checkpoints due after each
// step's bar update (the bar's clock paused while sampling), and the failures the plan asks for. A resumed
// loop starts where resume.ts says, skipping batches unseen.
import { print, type Io } from "./io.ts";
import type { FailurePlan, Knobs, StepFailure } from "./knobs.ts";
import { CUDA_OOM, traceback } from "./python.ts";
import type { ResumePoint } from "./resume.ts";
import type { SampleOutcome } from "./samples.ts";
import { ProgressBar } from "./tqdm.ts";

export interface TrainingPlan {
  trainImages: number;
  batchesPerEpoch: number;
  epochs: number;
  batchSizes: number[];
  totalSteps: number;
}

export interface Loop {
  plan: TrainingPlan;
  start: ResumePoint;
  seed: number;
  knobs: Knobs;
  // Takes the samples due at `step`.
  sample: (step: number) => Promise<SampleOutcome>;
  // Saves what is due once global_step reaches `step`, in the loop's 0-based `epoch`.
  afterStep: (step: number, epoch: number) => Promise<void>;
}

// A finished loop leaves its bar open: sd-scripts never closes it, so it closes when Python exits.
export type LoopOutcome = { finished: true; bar: ProgressBar; steps: number } | { finished: false; exitCode: number };

// Keeps the event loop alive while a hang is simulated.
const HANG_TICK_MS = 60_000;
// An SDXL LoRA's loss: a mean that falls early and then flattens, each step scattered 0.35x-1.65x around it.
const LOSS_FLOOR = 0.075;
const LOSS_EARLY_EXCESS = 0.045;
const LOSS_DECAY_PER_RUN = 3;

export async function runTrainingLoop(io: Io, { plan, start, seed, knobs, sample, afterStep }: Loop): Promise<LoopOutcome> {
  const { failures } = knobs;
  const bar = new ProgressBar(io, "steps", plan.totalSteps - start.initialStep);
  const random = seededRandom(seed);
  // sd-scripts' LossRecorder: epoch 1 averages every loss so far, later epochs a window one epoch long
  // (the loss at the same step is replaced, a gap counts as 0); a NaN never leaves the running total.
  const window: number[] = [];
  let total = 0;
  const nanFrom = Math.min(...failures.strikes.map((strike) => (strike.kind === "nan" ? strike.step : Infinity)));
  let globalStep = start.initialStep;
  for (let epoch = start.epoch; epoch < plan.epochs; epoch += 1) {
    print(io, `\nepoch ${epoch + 1}/${plan.epochs}\n`);
    // skip_first_batches drops all but the last batch to skip, which enumerate() numbers 0 and the loop passes.
    const skipped = epoch === start.epoch ? start.initialStep : 0;
    const batches = plan.batchesPerEpoch - Math.max(0, skipped - 1);
    for (let step = Math.min(skipped, 1); step < batches && globalStep < plan.totalSteps; step += 1) {
      for (const failure of failures.strikes.filter((strike) => strike.step === globalStep + 1)) {
        const exitCode = await strike(io, failures, failure, bar);
        if (exitCode !== null) return { finished: false, exitCode };
      }
      await io.sleep(knobs.secondsPerStep);
      bar.update();
      globalStep += 1;
      const sampled = await sample(globalStep);
      if (typeof sampled === "object") {
        bar.close();
        return { finished: false, exitCode: sampled.exitCode };
      }
      // sd-scripts unpauses after every step, but at real step times only sampling moves the clock.
      if (sampled === "sampled") bar.unpause();
      await afterStep(globalStep, epoch);
      const decay = Math.exp((-LOSS_DECAY_PER_RUN * globalStep) / Math.max(1, plan.totalSteps));
      const loss = (LOSS_FLOOR + LOSS_EARLY_EXCESS * decay) * (0.35 + 1.3 * random());
      const value = globalStep >= nanFrom ? Number.NaN : loss;
      const slot = epoch === 0 ? window.length : step;
      total = total - (window[slot] ?? 0) + value;
      window[slot] = value;
      bar.setPostfix({ avr_loss: total / window.length });
    }
  }
  return { finished: true, bar, steps: globalStep };
}

// mulberry32: a tiny 32-bit PRNG, so the same --seed always gives the same losses and weights.
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = Math.imul(state ^ (state >>> 15), state | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 2 ** 32;
  };
}

// The trainer's exit code for a failure that ends the run, or null for one that lets it go on.
async function strike(io: Io, failures: FailurePlan, failure: StepFailure, bar: ProgressBar): Promise<number | null> {
  switch (failure.kind) {
    case "oom":
      io.stderr(traceback(CUDA_OOM));
      bar.close();
      return 1;
    case "exit":
      return failure.code;
    case "hang":
      setInterval(() => {}, HANG_TICK_MS);
      return new Promise<never>(() => {});
    case "orphan":
      io.spawnStray({ escapeGroup: failure.escapeGroup, ignoreSigterm: failures.ignoreSigterm });
      return null;
    case "nan":
    case "sample-oom":
      return null;
  }
}
