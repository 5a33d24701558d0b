import { EXIT, isTerminal, type ExitCode, type GpuDeviceView, type GpuProcessView, type GpuStatus, type JobView } from "./worker-client.ts";

export function exitCodeOf(view: JobView): ExitCode {
  if (view.status === "failed") return EXIT.jobFailed;
  if (view.status === "cancelled") return EXIT.jobCancelled;
  return EXIT.ok;
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

/** The coarse status while it says more, else the finer phase ("caching", "saving"). */
function stage(view: JobView): string {
  return view.status === "training" ? view.phase : view.status;
}

/** One plain line per change, for logs and scripts: `status phase=… step=…/… loss=… eta=…`. */
export function progressLine(view: JobView): string {
  return `${view.status} phase=${view.phase} step=${steps(view)} loss=${loss(view)} eta=${duration(view.eta_s)}`;
}

/** The live bar, fitted to `columns` so a redraw with `\r` never wraps. */
export function barLine(view: JobView, columns: number): string {
  const fraction = view.total_steps ? view.step / view.total_steps : view.status === "succeeded" ? 1 : 0;
  const percent = `${String(Math.floor(fraction * 100)).padStart(3)}%`;
  const tail = `  ${steps(view)}  ${percent}  loss ${loss(view)}  ETA ${duration(view.eta_s)}`;
  const head = stage(view).padEnd(10);
  const width = Math.min(40, columns - 1 - head.length - tail.length - 2);
  const line = width >= 10 ? `${head}${meter(fraction, width)}${tail}` : `${head}${percent} ${steps(view)}`;
  return line.slice(0, Math.max(columns - 1, 1));
}

/** How a finished job ended, for a person: the LoRA it made, or why not. */
export function outcomeLines(view: JobView): string[] {
  const took = view.started_at && view.ended_at ? ` after ${duration((Date.parse(view.ended_at) - Date.parse(view.started_at)) / 1000)}` : "";
  if (view.status === "succeeded") {
    const size = view.lora_bytes === undefined ? "" : `${bytes(view.lora_bytes)}, `;
    return [`succeeded${took}: ${view.lora_path ?? "(no path)"} (${size}sha256 ${view.lora_sha256 ?? "-"})`];
  }
  if (view.status === "cancelled") return [`cancelled${took}${view.forced_kill ? " (the trainer needed SIGKILL)" : ""}`];
  if (view.status === "failed") {
    const how = [view.exit_code === undefined ? "" : `exit code ${view.exit_code}`, view.signal ?? ""].filter(Boolean).join(", ");
    return [`failed${took}: ${view.error_code ?? "unknown"}${how ? ` (${how})` : ""}`, ...(view.error ?? "").split("\n").filter(Boolean).map((l) => `  ${l}`)];
  }
  return [];
}

/** `status ID` for a person: one labelled line per fact. */
export function statusLines(view: JobView): string[] {
  const r = view.request;
  const rows: [string, string][] = [
    ["job", view.worker_job_id],
    ["status", `${view.status}, phase ${view.phase}${view.simulated ? " (simulated trainer)" : ""}`],
    ["progress", `${steps(view)} steps, loss ${loss(view)}${isTerminal(view.status) ? "" : `, ETA ${duration(view.eta_s)}`}`],
    ["request", `tier ${String(r.tier)} on device ${String(r.device_index)}, ${String(r.output_name)}, trigger ${String(r.trigger)}, seed ${String(r.seed)}`],
    ["created", view.created_at],
    ...(view.started_at ? [["started", view.started_at] as [string, string]] : []),
    ...(view.ended_at ? [["ended", view.ended_at] as [string, string]] : []),
  ];
  return [...rows.map(([k, v]) => `${k.padEnd(9)}${v}`), ...outcomeLines(view)];
}

/** `jobs`: one line a job, newest first. */
export function jobLine(view: JobView): string {
  const r = view.request;
  return [
    view.worker_job_id,
    view.status.padEnd(9),
    steps(view).padStart(9),
    `loss ${loss(view)}`,
    `${String(r.tier)}@${String(r.device_index)}`.padEnd(10),
    view.created_at,
    String(r.output_name),
    ...(view.error_code ? [view.error_code] : []),
  ].join("  ");
}

const BAR_WIDTH = 20;
const ROLE_LABEL: Record<GpuProcessView["role"], string> = { cotenant: "  [co-tenant]", training: "  [training: this worker's job]", other: "" };

/** `gpu` for a person: one row a device with a VRAM bar, its processes under it, co-tenants marked. */
export function gpuTable(status: GpuStatus): string[] {
  const nameWidth = Math.max(4, ...status.devices.map((d) => d.name.length));
  const header = `GPU  ${"NAME".padEnd(nameWidth)}  ${"VRAM USED".padEnd(BAR_WIDTH)}  ${"USED / TOTAL".padStart(19)}  ${"FREE".padStart(9)}  UTIL`;
  const rows = status.devices.flatMap((d) => [deviceRow(d, nameWidth), ...d.processes.map(processRow)]);
  return [header, ...rows, cotenantLine(status)];
}

function deviceRow(d: GpuDeviceView, nameWidth: number): string {
  const used = d.memory_used_mib;
  const total = d.memory_total_mib;
  const bar = used !== null && total ? meter(used / total, BAR_WIDTH) : "?".padEnd(BAR_WIDTH);
  const amounts = `${mib(used, 6)} / ${mib(total, 6)} MiB`;
  const util = d.utilization_pct === null ? "?" : `${d.utilization_pct}%`;
  return `${String(d.index).padEnd(3)}  ${d.name.padEnd(nameWidth)}  ${bar}  ${amounts.padStart(19)}  ${`${mib(d.memory_free_mib, 0)} MiB`.padStart(9)}  ${util}`;
}

function processRow(p: GpuProcessView): string {
  return `       pid ${String(p.pid).padEnd(8)} ${`${mib(p.used_mib, 0)} MiB`.padStart(10)}  ${p.name}${ROLE_LABEL[p.role]}`;
}

function cotenantLine(status: GpuStatus): string {
  if (status.cotenants.length === 0) return "co-tenants: none";
  const list = status.cotenants.map((c) => `${c.name} (pid ${c.pid}, ${mib(c.used_mib, 0)} MiB) on GPU ${c.device_index}`).join("; ");
  return `co-tenants: ${list}${status.tts_on_3090 ? " — tts_on_3090: training on the 24 GB card competes with it" : ""}`;
}

function mib(value: number | null, width: number): string {
  return (value === null ? "?" : String(value)).padStart(width);
}

const FULL = "█";
const EMPTY = "░";
const PARTIAL = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];

/** A bar of `width` cells filled to `fraction` (0–1), in eighths of a cell. */
export function meter(fraction: number, width: number): string {
  const eighths = Math.round(Math.min(Math.max(fraction, 0), 1) * width * 8);
  const full = Math.floor(eighths / 8);
  const part = PARTIAL[eighths % 8]!;
  return FULL.repeat(full) + part + EMPTY.repeat(width - full - (part ? 1 : 0));
}

// JSON.stringify escapes C0 but leaves DEL and C1 raw, which a terminal would get shown as ^? and M-^[ (changing
// the JSON) or act on. As \u escapes they are the same JSON value: exact on a pipe, inert on a terminal.
const RAW_CONTROL = /[\x7f-\x9f]/g;

/** `value` as JSON on one line, with no control character left raw. */
export function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(RAW_CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
