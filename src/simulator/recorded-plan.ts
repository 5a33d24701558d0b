// The training plan a recorded log states in its `running training / 学習開始` block, for the
// metadata of the LoRA a replay saves; whatever the log leaves out follows from the step count.
import type { TrainingPlan } from "./network-setup.ts";
import type { RecordedLine } from "./recorded-log.ts";

const TRAIN_IMAGES = /^\s*num train images \* repeats .*: (\d+)$/;
const BATCHES_PER_EPOCH = /^\s*num batches per epoch .*: (\d+)$/;
const EPOCHS = /^\s*num epochs .*: (\d+)$/;
const BATCH_SIZE = /^\s*batch size per device .*: (\d+)$/;

export function recordedPlan(lines: RecordedLine[], totalSteps: number): TrainingPlan {
  return {
    trainImages: stated(lines, TRAIN_IMAGES) ?? 0,
    batchesPerEpoch: stated(lines, BATCHES_PER_EPOCH) ?? totalSteps,
    epochs: stated(lines, EPOCHS) ?? 1,
    batchSizes: [stated(lines, BATCH_SIZE) ?? 1],
    totalSteps,
  };
}

function stated(lines: RecordedLine[], pattern: RegExp): number | null {
  for (const line of lines) {
    const match = pattern.exec(line.text);
    if (match !== null) return Number(match[1]);
  }
  return null;
}
