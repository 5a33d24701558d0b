// Training progress folded from sd-scripts' log records (tracker.ts frames them): the tqdm bar's redraws and the
// trainer's own messages.
import { Phase, type ProgressFields } from "../job.ts";

export type { Phase } from "../job.ts";

export interface Progress extends ProgressFields {
  last_loss_nan: boolean;
  nan_streak: number;
  seconds_per_step: number | null;
  /** The run's own step count (the tier's max_train_steps); a bar or total that contradicts it is not progress. */
  expected_total: number | null;
  /** The first total the trainer printed that contradicts expected_total: an anomaly to report, not progress. */
  contradicting_total: number | null;
  /** Where the last bar of a contradicting total stood: its nan readings count towards nan_streak once a step. */
  contradicting_n: number | null;
  /** The step a resumed run started from: its steps bar counts only the steps after it, from 0. */
  resumed_at: number;
  /** The step whose preview samples are being taken (phase sampling), as the trainer announced it. */
  sampling_step: number | null;
}

const PHASE_ORDER: readonly Phase[] = Phase.options;

const TRAINING_BAR = "steps";
const TOTAL_STEPS = /total optimization steps\b[^:]*:\s*(\d+)/;
const CACHING = /\bcach(?:e|ing) (?:latents|text encoder outputs)\b/i;
const TRAINING_START = /^(?:running training\b|epoch \d+\/\d+$)/;
const FINAL_SAVE = /^save trained model\b/;
const CHECKPOINT_SAVE = /\bsaving checkpoint: /;
// train_util.sample_images_common, in English and Japanese on one line.
const SAMPLING = /^generating sample images at step\b.*?(\d+)$/;
const MODEL_SAVED = /(?:^|\s)model saved\.(?:\s|$)/;

// Without an expected total (a replayed recording, a run recovered without its record), the first total the
// trainer announces becomes it.
export function initialProgress(expectedTotal: number | null = null, resumedAt = 0): Progress {
  return {
    phase: "loading",
    step: resumedAt,
    total_steps: expectedTotal,
    loss: null,
    last_loss_nan: false,
    nan_streak: 0,
    eta_s: null,
    seconds_per_step: null,
    expected_total: expectedTotal,
    contradicting_total: null,
    contradicting_n: null,
    resumed_at: resumedAt,
    sampling_step: null,
  };
}

export function applyLine(p: Progress, line: string): Progress {
  const bar = parseTqdmBar(line);
  const next = bar === null ? applyMessage(p, line.trim()) : applyMessage(applyBar(p, bar), bar.trailing);
  return sameProgress(p, next) ? p : next;
}

function applyBar(p: Progress, bar: TqdmBar): Progress {
  if (bar.description === TRAINING_BAR) return applyStepsBar(p, bar);
  if (CACHING.test(bar.description)) return { ...p, phase: advance(p.phase, "caching") };
  return p;
}

// Progress is in the whole run's terms: a resumed run's bar counts from 0 the steps after the state it started from.
function applyStepsBar(p: Progress, bar: TqdmBar): Progress {
  const total = p.resumed_at + bar.total;
  // A bar counting past its total, or another run's total, would write a loss point per redraw: not progress.
  if (!fitsTotal(p, total)) return { ...contradicted(p, total), ...contradictingLoss(p, bar) };
  if (bar.n > bar.total) return p;
  const finished = bar.total > 0 && bar.n >= bar.total;
  const step = p.resumed_at + bar.n;
  return {
    ...p,
    ...applyLoss(p, step, bar.postfix.avr_loss),
    // Samples end when the next step does: a redraw of the sampled step (the one tqdm throttled, or its close at
    // exit) is not one.
    phase: p.phase === "sampling" && step <= (p.sampling_step ?? 0)
      ? "sampling"
      : afterSampling(p, finished ? "saving" : "training"),
    step,
    total_steps: total,
    expected_total: total,
    eta_s: bar.n === 0 ? null : bar.remaining_s,
    seconds_per_step: bar.seconds_per_it,
  };
}

// tqdm redraws a step more than once (on update, then on set_postfix), so a nan only extends the streak when it
// is the first nan reading of its step; `newStep` says whether the redraw is of a step the streak has not seen.
function readLoss(p: Progress, raw: string | undefined, newStep: boolean): Partial<Progress> {
  if (raw === undefined) return {};
  const value = Number.parseFloat(raw);
  if (Number.isFinite(value)) return { loss: value, last_loss_nan: false, nan_streak: 0 };
  const extendsStreak = newStep || !p.last_loss_nan;
  return { last_loss_nan: true, nan_streak: p.nan_streak + (extendsStreak ? 1 : 0) };
}

function applyLoss(p: Progress, step: number, raw: string | undefined): Partial<Progress> {
  return readLoss(p, raw, step > p.step);
}

// NaN is NaN whatever the bar's total: a contradicting bar's losses are no progress, but a nan among them counts
// towards the streak that stops the run (once a step of that bar's own), and a finite one ends the streak.
function contradictingLoss(p: Progress, bar: TqdmBar): Partial<Progress> {
  const { loss: _, ...streak } = readLoss(p, bar.postfix.avr_loss, bar.n > (p.contradicting_n ?? -1));
  return { ...streak, contradicting_n: bar.n };
}

function applyMessage(p: Progress, text: string): Progress {
  if (text === "") return p;
  const total = TOTAL_STEPS.exec(text);
  if (total !== null) {
    const steps = Number(total[1]);
    return fitsTotal(p, steps) ? { ...p, total_steps: steps, expected_total: steps } : contradicted(p, steps);
  }
  // sd-scripts samples at its preview steps, the last included, before it saves a state due at the same step.
  const sampling = SAMPLING.exec(text);
  if (sampling !== null) {
    const paused = p.phase === "training" || p.phase === "saving";
    return paused ? { ...p, phase: "sampling", sampling_step: Number(sampling[1]) } : p;
  }
  return { ...p, phase: afterSampling(p, messagePhase(p, text)) };
}

function messagePhase(p: Progress, text: string): Phase {
  if (MODEL_SAVED.test(text)) return "done";
  if (FINAL_SAVE.test(text) || (CHECKPOINT_SAVE.test(text) && reachedLastStep(p))) return "saving";
  if (CHECKPOINT_SAVE.test(text) && p.phase === "sampling") return "training";
  if (TRAINING_START.test(text)) return "training";
  if (CACHING.test(text)) return "caching";
  return p.phase;
}

// Sampling is the one phase a run leaves backwards, for the one it paused.
function afterSampling(p: Progress, next: Phase): Phase {
  return p.phase === "sampling" && next !== "sampling" ? next : advance(p.phase, next);
}

function contradicted(p: Progress, total: number): Progress {
  return p.contradicting_total === null ? { ...p, contradicting_total: total } : p;
}

function fitsTotal(p: Progress, total: number): boolean {
  return p.expected_total === null || p.expected_total === total;
}

// Intermediate checkpoints are saved mid-run; only one written after the last step is the final save.
function reachedLastStep(p: Progress): boolean {
  return p.total_steps !== null && p.step >= p.total_steps;
}

function advance(current: Phase, candidate: Phase): Phase {
  return PHASE_ORDER.indexOf(candidate) > PHASE_ORDER.indexOf(current) ? candidate : current;
}

function sameProgress(a: Progress, b: Progress): boolean {
  return (Object.keys(a) as (keyof Progress)[]).every((key) => Object.is(a[key], b[key]));
}

// One redraw of a tqdm bar with a known total, in tqdm's default format
// `{desc}: {percentage}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]`.
// Colab-style output has no `|{bar}|`; whatever follows the closing "]" was printed by
// someone else onto the same record and is returned as `trailing`.
/** What a terminal shows of a line: of a tqdm bar redrawn with "\r", only the last drawing. */
export function screenLine(line: string): string {
  return line.split("\r").filter((part) => part !== "").at(-1) ?? "";
}

export interface TqdmBar {
  description: string;
  n: number;
  total: number;
  remaining_s: number | null;
  seconds_per_it: number | null;
  postfix: Record<string, string>;
  trailing: string;
}

const BAR = /^(?:(.*?):\s*)?\d+%(?:\|[^|]*\|)?\s*(\d+)\/(\d+)\s*\[([^\]]*)\](.*)$/;
const RATE = /^(\d+(?:\.\d+)?)(it\/s|s\/it)$/;
const INTERVAL = /^\d+(?::\d\d){1,2}$/;

export function parseTqdmBar(record: string): TqdmBar | null {
  const match = BAR.exec(record.trim());
  if (match === null) return null;
  const [, description = "", n = "", total = "", status = "", trailing = ""] = match;
  const [times = "", rate = "", ...postfix] = status.split(",").map((part) => part.trim());
  return {
    description: description.trim(),
    n: Number(n),
    total: Number(total),
    remaining_s: parseInterval(times.split("<")[1] ?? ""),
    seconds_per_it: parseRate(rate),
    postfix: parsePostfix(postfix),
    trailing: trailing.trim(),
  };
}

// tqdm prints intervals as MM:SS, or H:MM:SS past an hour, and "?" while unknown.
function parseInterval(text: string): number | null {
  if (!INTERVAL.test(text)) return null;
  return text.split(":").reduce((seconds, part) => seconds * 60 + Number(part), 0);
}

// tqdm flips the unit so the number stays >= 1: `1.75it/s` when fast, `1.50s/it` when slow.
function parseRate(text: string): number | null {
  const match = RATE.exec(text);
  if (match === null) return null;
  const value = Number(match[1]);
  if (match[2] === "s/it") return value;
  return value > 0 ? 1 / value : null;
}

function parsePostfix(parts: string[]): Record<string, string> {
  const postfix: Record<string, string> = {};
  for (const part of parts) {
    const separator = part.indexOf("=");
    if (separator > 0) postfix[part.slice(0, separator)] = part.slice(separator + 1);
  }
  return postfix;
}
