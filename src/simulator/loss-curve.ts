// Losses shaped like an SDXL LoRA run: each step's loss scatters widely (it depends on the sampled
// timestep) around a mean that falls early and then flattens; sd-scripts shows a running mean.
import { seededRandom } from "./seeded-random.ts";

const FLOOR = 0.075;
const EARLY_EXCESS = 0.045;
const DECAY_PER_RUN = 3;
// Uniform scatter from 0.35x to 1.65x the mean, so the mean is kept.
const SCATTER_LOW = 0.35;
const SCATTER_WIDTH = 1.3;

export function lossCurve(seed: number, totalSteps: number): (step: number) => number {
  const random = seededRandom(seed);
  return (step) => {
    const mean = FLOOR + EARLY_EXCESS * Math.exp((-DECAY_PER_RUN * step) / Math.max(1, totalSteps));
    return mean * (SCATTER_LOW + SCATTER_WIDTH * random());
  };
}

// sd-scripts' LossRecorder: the first epoch averages every loss so far; later epochs replace the
// loss at the same step index, a window one epoch long. A NaN never leaves the running total.
export class LossRecorder {
  private readonly losses: number[] = [];
  private total = 0;

  add(epoch: number, step: number, loss: number): void {
    if (epoch === 0) {
      this.losses.push(loss);
    } else {
      while (this.losses.length <= step) this.losses.push(0);
      this.total -= this.losses[step]!;
      this.losses[step] = loss;
    }
    this.total += loss;
  }

  get movingAverage(): number {
    return this.total / this.losses.length;
  }
}
