// Replaying a recorded sd-scripts log instead of simulating a run, in a live run's framing: plain
// lines on stdout; each tqdm line on stderr as the redraw it records, "\r" + the meter and no newline
// of its own, then the log's "\n" (on stdout when stdout text was glued after the bar). A raw log's
// redraws that share one physical line are drawn one by one. `steps:` bars keep the log's own pace,
// tqdm's elapsed time divided by the speed; other lines print at once. Then the run ends as its log
// says it must have (replay-ending.ts).
import type { FailurePlan } from "./failure-plan.ts";
import { print, type Io } from "./io.ts";
import type { Log } from "./logger.ts";
import { finalLoraPath, writeLoraFile } from "./lora-file.ts";
import { lastStepsBar, type RecordedLine } from "./recorded-log.ts";
import { recordedPlan } from "./recorded-plan.ts";
import { judgeEnding } from "./replay-ending.ts";
import type { ScriptArgs } from "./script-argv.ts";

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
  const { io, lines, speed } = replay;
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
      spawnStraysDue(replay, step, bar.n);
      step = Math.max(step, bar.n);
    }
    io.stderr(`\r${bar.meter}`);
    if (bar.after === "") io.stderr(end);
    else io.stdout(`${bar.after}${end}`);
  }
}

// Strays planned for the steps the log has just gone past.
function spawnStraysDue({ io, failures }: Replay, after: number, upTo: number): void {
  for (const failure of failures.strikes) {
    if (failure.kind !== "orphan" || failure.step <= after || failure.step > upTo) continue;
    io.spawnStray({ escapeGroup: failure.escapeGroup, ignoreSigterm: failures.ignoreSigterm });
  }
}

// The file is always written where the worker expects it; the lines only where the log lacks them.
async function save({ io, log, args, outputDir, lines }: Replay, startedAt: number): Promise<void> {
  const announced = lines.some((line) => line.text.includes(MODEL_SAVED));
  const path = finalLoraPath(outputDir, args.output_name);
  const steps = lastStepsBar(lines)?.n ?? 0;
  if (!announced) print(io, `saving checkpoint: ${path}`);
  await writeLoraFile(path, { args, plan: recordedPlan(lines, steps), resolution: RESOLUTION, steps, startedAt, finishedAt: io.wallClock() });
  if (!announced) log("INFO", MODEL_SAVED);
}
