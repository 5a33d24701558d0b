// How a recorded run must have ended, judged from its log: the first rule whose evidence the log
// holds decides between an exit code of the trainer and saving the LoRA. Exceptions Python reported
// and went on past (ignored-exceptions.ts) are no evidence: the run did not end on them.
import { withoutIgnoredExceptions } from "./ignored-exceptions.ts";
import { lastStepsBar, type RecordedLine } from "./recorded-log.ts";

export type Ending = { kind: "exit"; code: number } | { kind: "save" };

interface Rule {
  evidence(lines: RecordedLine[]): boolean;
  ending: Ending;
}

// Python's exit status for an uncaught exception, and for a script it cannot open or bad arguments.
const EXCEPTION_EXIT = 1;
const USAGE_EXIT = 2;

const TRACEBACK = "Traceback (most recent call last):";
const CANT_OPEN = /: can't open file .*\[Errno 2\]/;
const CUDA_OOM = /CUDA out of memory|OutOfMemoryError/;
// argparse's last word: `sdxl_train_network.py: error: ...`.
const ARGPARSE_ERROR = /^\S+: error: /;
// The last line of an uncaught exception: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`.
const EXCEPTION_LINE = /^\W*[\w.]*(?:Error|Exception)(?::|$)/;
const NO_DATA = "No data found";

const RULES: readonly Rule[] = [
  { evidence: (lines) => lines.some((line) => CANT_OPEN.test(line.text)), ending: exit(USAGE_EXIT) },
  { evidence: (lines) => ARGPARSE_ERROR.test(lastText(lines)), ending: exit(USAGE_EXIT) },
  { evidence: (lines) => lines.some((line) => line.text.includes(TRACEBACK) || CUDA_OOM.test(line.text)), ending: exit(EXCEPTION_EXIT) },
  { evidence: (lines) => EXCEPTION_LINE.test(lastText(lines)), ending: exit(EXCEPTION_EXIT) },
  // sd-scripts returns normally when it finds no images.
  { evidence: (lines) => lines.some((line) => line.text.includes(NO_DATA)), ending: exit(0) },
  { evidence: trainedToTheEnd, ending: { kind: "save" } },
];
// A log that simply stops is a run that died without saying why: killed, or cut off mid-run.
const STOPPED = exit(EXCEPTION_EXIT);

export function judgeEnding(lines: RecordedLine[]): Ending {
  const fatal = withoutIgnoredExceptions(lines);
  return RULES.find((rule) => rule.evidence(fatal))?.ending ?? STOPPED;
}

function trainedToTheEnd(lines: RecordedLine[]): boolean {
  const bar = lastStepsBar(lines);
  return bar !== null && bar.n === bar.total;
}

function lastText(lines: RecordedLine[]): string {
  return lines.findLast((line) => line.text.trim() !== "")?.text ?? "";
}

function exit(code: number): Ending {
  return { kind: "exit", code };
}
