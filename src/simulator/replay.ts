// Replaying a recorded sd-scripts log instead of simulating a run, in a live run's framing: plain lines
// on stdout; each tqdm line on stderr as the redraw it records, "\r" + the meter and no newline of its
// own, then the log's "\n" (on stdout when stdout text was glued after the bar). `steps:` bars keep the
// log's own pace, tqdm's elapsed time divided by the speed; other lines print at once. Then the run ends
// as its log says it must have (recorded-log.ts judgeEnding).
import type { ScriptArgs } from "./argv.ts";
import { print, type Io, type Log } from "./io.ts";
import type { FailurePlan } from "./knobs.ts";
import { finalLoraPath, writeLoraFile } from "./lora-file.ts";
import { judgeEnding, lastStepsBar, type RecordedLine } from "./recorded-log.ts";
import type { TrainingPlan } from "./training-loop.ts";

export interface Replay {
  io: Io;
  log: Log;
  args: ScriptArgs;
  outputDir: string;
  lines: RecordedLine[];
  speed: number;
  failures: FailurePlan;
}

const MODEL_SAVED = "model saved.";
// SDXL's native size: a recorded log does not say what resolution its dataset had.
const RESOLUTION: [number, number] = [1024, 1024];
// The `running training / 学習開始` block, for the metadata of the LoRA a replay saves.
const STATED = {
  trainImages: /^\s*num train images \* repeats .*: (\d+)$/,
  batchesPerEpoch: /^\s*num batches per epoch .*: (\d+)$/,
  epochs: /^\s*num epochs .*: (\d+)$/,
  batchSize: /^\s*batch size per device .*: (\d+)$/,
};

// Resolves to the exit code the Python process would have had.
export async function replayRun(replay: Replay): Promise<number> {
  const startedAt = replay.io.wallClock();
  await play(replay);
  const ending = judgeEnding(replay.lines);
  if (ending.kind === "exit") return ending.code;
  await save(replay, startedAt);
  return 0;
}

async function play(replay: Replay): Promise<void> {
  const { io, lines, speed, failures } = replay;
  const start = io.now();
  let step = 0;
  for (const { text, newline, redraw, bar } of lines) {
    const end = newline ? "\n" : "";
    if (bar === null) {
      io.stdout(`${redraw ? "\r" : ""}${text}${end}`);
      continue;
    }
    if (bar.description === "steps") {
      if (bar.elapsedSeconds !== null) await io.sleep(Math.max(0, start + bar.elapsedSeconds / speed - io.now()));
      // Strays planned for the steps the log has just gone past.
      for (const strike of failures.strikes) {
        if (strike.kind === "orphan" && strike.step > step && strike.step <= bar.n) {
          io.spawnStray({ escapeGroup: strike.escapeGroup, ignoreSigterm: failures.ignoreSigterm });
        }
      }
      step = Math.max(step, bar.n);
    }
    io.stderr(`\r${bar.meter}`);
    if (bar.after === "") io.stderr(end);
    else io.stdout(`${bar.after}${end}`);
  }
}

// The file is always written where the worker expects it; the lines only where the log lacks them.
async function save({ io, log, args, outputDir, lines }: Replay, startedAt: number): Promise<void> {
  const announced = lines.some((line) => line.text.includes(MODEL_SAVED));
  const path = finalLoraPath(outputDir, args.output_name);
  const steps = lastStepsBar(lines)?.n ?? 0;
  if (!announced) print(io, `saving checkpoint: ${path}`);
  const plan = recordedPlan(lines, steps);
  const run = { args, plan, resolution: RESOLUTION, steps, epoch: plan.epochs, startedAt };
  // A recording says nothing of the captions it trained on.
  await writeLoraFile(path, { ...run, tagFrequency: {}, finishedAt: io.wallClock() });
  if (!announced) log("INFO", MODEL_SAVED);
}

// Whatever the log leaves out follows from the step count.
function recordedPlan(lines: RecordedLine[], totalSteps: number): TrainingPlan {
  const stated = (pattern: RegExp, fallback: number) => {
    const match = lines.map((line) => pattern.exec(line.text)).find((found) => found !== null);
    return Number(match?.[1] ?? fallback);
  };
  return {
    trainImages: stated(STATED.trainImages, 0),
    batchesPerEpoch: stated(STATED.batchesPerEpoch, totalSteps),
    epochs: stated(STATED.epochs, 1),
    batchSizes: [stated(STATED.batchSize, 1)],
    totalSteps,
  };
}
