// sd-scripts' training loop as seen from outside: `epoch e/E` on stdout at each epoch start, a
// `steps:` tqdm bar on stderr redrawn at every step with avr_loss, and any planned failures.
import type { FailurePlan, StepFailure } from "./failure-plan.ts";
import { print, type Io } from "./io.ts";
import type { Log } from "./logger.ts";
import { LossRecorder, lossCurve } from "./loss-curve.ts";
import type { TrainingPlan } from "./network-setup.ts";
import { ProgressBar } from "./progress-bar.ts";
import { cudaOomTraceback } from "./python-errors.ts";

export interface Loop {
  io: Io;
  log: Log;
  plan: TrainingPlan;
  seed: number;
  secondsPerStep: number;
  failures: FailurePlan;
  scriptDir: string;
}

// A finished loop leaves its bar open: sd-scripts never closes it, so it closes when Python exits.
export type LoopOutcome = { finished: true; bar: ProgressBar; steps: number } | { finished: false; exitCode: number };

// Keeps the event loop alive while a hang is simulated.
const HANG_TICK_MS = 60_000;

export async function runTrainingLoop(loop: Loop): Promise<LoopOutcome> {
  const { io, log, plan, failures } = loop;
  const bar = new ProgressBar(io, "steps", plan.totalSteps);
  const loss = lossCurve(loop.seed, plan.totalSteps);
  const recorder = new LossRecorder();
  const nanFrom = Math.min(...failures.strikes.map((failure) => (failure.kind === "nan" ? failure.step : Number.POSITIVE_INFINITY)));
  let globalStep = 0;
  for (let epoch = 0; epoch < plan.epochs; epoch += 1) {
    print(io, `\nepoch ${epoch + 1}/${plan.epochs}\n`);
    log("INFO", `epoch is incremented. current_epoch: ${epoch}, epoch: ${epoch + 1}`);
    for (let step = 0; step < plan.batchesPerEpoch && globalStep < plan.totalSteps; step += 1) {
      for (const failure of failures.strikes.filter((strike) => strike.step === globalStep + 1)) {
        const exitCode = await strike(loop, failure, bar);
        if (exitCode !== null) return { finished: false, exitCode };
      }
      await io.sleep(loop.secondsPerStep);
      bar.update();
      globalStep += 1;
      recorder.add(epoch, step, globalStep >= nanFrom ? Number.NaN : loss(globalStep));
      bar.setPostfix({ avr_loss: recorder.movingAverage });
    }
  }
  return { finished: true, bar, steps: globalStep };
}

// The trainer's exit code for a failure that ends the run, or null for one that lets it go on.
async function strike(loop: Loop, failure: StepFailure, bar: ProgressBar): Promise<number | null> {
  switch (failure.kind) {
    case "oom":
      loop.io.stderr(cudaOomTraceback(loop.scriptDir));
      bar.close();
      return 1;
    case "exit":
      return failure.code;
    case "hang":
      setInterval(() => {}, HANG_TICK_MS);
      return new Promise<never>(() => {});
    case "orphan":
      loop.io.spawnStray({ escapeGroup: failure.escapeGroup, ignoreSigterm: loop.failures.ignoreSigterm });
      return null;
    case "nan":
      return null;
  }
}
