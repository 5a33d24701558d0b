import { datasetRows } from "./dataset-rows.ts";
import { likenessRows } from "./likeness-rows.ts";
import { EXIT, type ExitCode } from "./exit.ts";
import { isTerminal, type JobView } from "./worker-client.ts";

export function exitCodeOf(view: JobView): ExitCode {
  if (view.status === "failed") return EXIT.jobFailed;
  if (view.paused) return EXIT.jobPaused;
  if (view.status === "cancelled") return EXIT.jobCancelled;
  return EXIT.ok;
}

// The word a person reads for a job's status: an ended job a resume continued is `resumed`, a paused one `paused`.
export function shownStatus(view: JobView): string {
  if (view.paused) return "paused";
  return view.resumed_by ? "resumed" : view.status;
}

export function duration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return "-";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`;
}

export const loss = (view: JobView): string => (view.loss === null ? "-" : view.loss.toFixed(4));
export const steps = (view: JobView): string => `${view.step}/${view.total_steps ?? "?"}`;

// The coarse status while it says more, else the finer phase ("caching", "saving").
function stage(view: JobView): string {
  return view.status === "training" ? view.phase : view.status;
}

// One plain line per change, for logs and scripts: `status phase=… step=…/… loss=… eta=…`.
export function progressLine(view: JobView): string {
  return `${view.status} phase=${view.phase} step=${steps(view)} loss=${loss(view)} eta=${duration(view.eta_s)}`;
}

// The live bar, fitted to `columns` so a redraw with `\r` never wraps.
export function barLine(view: JobView, columns: number): string {
  const fraction = view.total_steps ? view.step / view.total_steps : view.status === "succeeded" ? 1 : 0;
  const percent = `${String(Math.floor(fraction * 100)).padStart(3)}%`;
  const tail = `  ${steps(view)}  ${percent}  loss ${loss(view)}  ETA ${duration(view.eta_s)}`;
  const head = stage(view).padEnd(10);
  const width = Math.min(40, columns - 1 - head.length - tail.length - 2);
  const line = width >= 10 ? `${head}${meter(fraction, width)}${tail}` : `${head}${percent} ${steps(view)}`;
  return line.slice(0, Math.max(columns - 1, 1));
}

// How a finished job ended, for a person: the LoRA it made, or why not.
export function outcomeLines(view: JobView): string[] {
  const { started_at: started, ended_at: ended } = view;
  const took = started && ended ? ` after ${duration((Date.parse(ended) - Date.parse(started)) / 1000)}` : "";
  if (view.status === "succeeded") {
    const size = view.lora_bytes === undefined ? "" : `${bytes(view.lora_bytes)}, `;
    return [`succeeded${took}: ${view.lora_path ?? "(no path)"} (${size}sha256 ${view.lora_sha256 ?? "-"})`];
  }
  if (view.paused) return [`paused${took} at step ${view.resume_step ?? view.step}`];
  if (view.status === "cancelled" && view.resumed_by) return [`cancelled${took}, resumed by job ${view.resumed_by}`];
  if (view.status === "cancelled") {
    return [`cancelled${took}${view.forced_kill ? " (the trainer needed SIGKILL)" : ""}`];
  }
  if (view.status === "failed") {
    const exit = view.exit_code === undefined ? "" : `exit code ${view.exit_code}`;
    const how = [exit, view.signal ?? ""].filter(Boolean).join(", ");
    const errorLines = (view.error ?? "").split("\n").filter(Boolean).map((l) => `  ${l}`);
    return [`failed${took}: ${view.error_code ?? "unknown"}${how ? ` (${how})` : ""}`, ...errorLines];
  }
  return [];
}

// `status ID` for a person: one labelled line per fact; `baseUrl` (the worker's) makes the samples' URLs absolute.
export function statusLines(view: JobView, baseUrl: string): string[] {
  const r = view.request;
  const shown = shownStatus(view);
  const paused = shown === view.status ? "" : ` (${shown})`;
  const eta = isTerminal(view.status) ? "" : `, ETA ${duration(view.eta_s)}`;
  const rows: [string, string][] = [
    ["job", view.worker_job_id],
    ["status", `${view.status}${paused}, phase ${view.phase}${view.simulated ? " (simulated trainer)" : ""}`],
    ["progress", `${steps(view)} steps, loss ${loss(view)}${eta}`],
    ["request", `tier ${String(r.tier)} on device ${String(r.device_index)}, ${String(r.output_name)}, ` +
      `trigger ${String(r.trigger)}, seed ${String(r.seed)}${samplesNote(r.samples)}`],
    ["created", view.created_at],
    ...(view.started_at ? [["started", view.started_at] as [string, string]] : []),
    ...(view.ended_at ? [["ended", view.ended_at] as [string, string]] : []),
    ...datasetRows(view),
    ...resumeRows(view, baseUrl),
    ...sampleRows(view, baseUrl),
    ...likenessRows(view, baseUrl),
  ];
  const hint = resumeHint(view);
  // What to do, as docs/troubleshooting.md says it (its `code` marks dropped), before the resume where that is
  // the second choice: several steps as the page's numbered list, one on its own line.
  const todo = (view.next_step?.steps ?? []).map((step) => step.replaceAll("`", ""));
  const next = todo.length > 1 ? ["what to do:", ...todo.map((step, i) => `  ${i + 1}. ${step}`)]
    : todo.map((step) => `what to do: ${step}`);
  return [
    ...rows.map(([k, v]) => `${k.padEnd(9)}${v}`), ...outcomeLines(view), ...next, ...(hint === null ? [] : [hint]),
  ];
}

// The runs before and after this one, its newest saved state and the intermediate LoRAs beside it.
function resumeRows(view: JobView, baseUrl: string): [string, string][] {
  const rows: [string, string][] = [];
  if (view.resumed_from) {
    rows.push(["resumed", `from job ${view.resumed_from} at step ${view.resumed_from_step ?? "?"}`]);
  }
  if (view.resume_step !== null) rows.push(["resume", `from step ${view.resume_step} (the newest saved state)`]);
  // A succeeded job's states are removed on purpose: why they are gone matters only for a job one would resume.
  else if (view.resume_gone && view.status !== "succeeded") {
    rows.push(["resume", `no saved state: ${view.resume_gone}`]);
  }
  view.checkpoints.forEach((c, i) => rows.push([i === 0 ? "saved" : "", `step ${c.step}: ${baseUrl}${c.url}`]));
  if (view.resumed_by) rows.push(["resumed", `by job ${view.resumed_by}`]);
  return rows;
}

// One row per step drawn, in step order: each preview's template (with "/class" for its draw without the trigger)
// and the URL that serves it (with the token).
function sampleRows(view: JobView, baseUrl: string): [string, string][] {
  // An older worker, one without preview samples, sends no `samples`.
  const byStep = Map.groupBy(view.samples ?? [], (s) => s.step);
  return [...byStep].map(([step, samples], i) => [
    i === 0 ? "samples" : "",
    `step ${step}: ${samples.map((s) => `${sampleName(s)} ${baseUrl}${s.url}`).join(", ")}`,
  ]);
}

const samplesNote = (samples: unknown) => (samples ? `, ${samples} sample prompts with and without the trigger` : "");

// An older worker's samples name no subject.
const sampleName = (s: NonNullable<JobView["samples"]>[number]) =>
  `${s.template ?? `#${s.index}`}${s.subject === "class" ? "/class" : ""}`;

// The command that continues a resumable job, or null.
export function resumeHint(view: JobView): string | null {
  return view.resumable ? `resume with: lora-worker resume ${view.worker_job_id}` : null;
}

const FULL = "█";
const EMPTY = "░";
const PARTIAL = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];

// A bar of `width` cells filled to `fraction` (0–1), in eighths of a cell.
export function meter(fraction: number, width: number): string {
  const eighths = Math.round(Math.min(Math.max(fraction, 0), 1) * width * 8);
  const full = Math.floor(eighths / 8);
  const part = PARTIAL[eighths % 8]!;
  return FULL.repeat(full) + part + EMPTY.repeat(width - full - (part ? 1 : 0));
}

// JSON.stringify escapes C0 but leaves DEL and C1 raw, which a terminal would get shown as ^? and M-^[ (changing
// the JSON) or act on. As \u escapes they are the same JSON value: exact on a pipe, inert on a terminal.
const RAW_CONTROL = /[\x7f-\x9f]/g;

// `value` as JSON on one line, with no control character left raw.
export function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(RAW_CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
