import { loss, meter, shownStatus, steps } from "./format.ts";
import { SHORT_ID } from "./job-id.ts";
import { printable } from "../../printable.ts";
import type { ClusterGpuStatus, GpuDeviceView, GpuProcessView, HostGpuStatus, JobView } from "./worker-client.ts";

// Tables fitted to a terminal's width. A layout is one way to show a row, and a table lists them widest
// first: the first layout in which every row fits is used for all rows, so its cells line up. After the
// cells a row may have a tail: text cut with "…" to leave room for a suffix; a tail marked `droppable` may go
// when even its cut form does not fit, else the row does not fit that layout. Into a pipe the width is
// unbounded and the first layout is always the one used.

interface RowCells {
  cells: string[];
  tail?: { text: string; suffix?: string; droppable?: boolean };
}

type Layout<Row> = (row: Row) => RowCells;

const GAP = "  ";
const ELLIPSIS = "…";
// A tail cut shorter than this says too little: it is dropped instead (or the row does not fit).
const MIN_TAIL = 8;

// What `text` takes on a terminal, where control characters are shown in caret notation.
const widthOf = (text: string): number => Bun.stringWidth(printable(text));

function fitTable<Row>(rows: readonly Row[], layouts: readonly Layout<Row>[], columns: number): string[] {
  for (const layout of layouts) {
    const lines = rows.map((row) => fitRow(layout(row), columns));
    if (lines.every((line) => line !== null)) return lines as string[];
  }
  const narrowest = layouts.at(-1)!;
  return rows.map((row) => cut(joined(narrowest(row)), columns));
}

// The row whole, else with its tail cut (or dropped, when droppable); null when it does not fit so.
function fitRow(row: RowCells, columns: number): string | null {
  const whole = joined(row);
  if (widthOf(whole) <= columns) return whole;
  if (!row.tail) return null;
  const head = row.cells.join(GAP);
  const suffix = row.tail.suffix ? `${GAP}${row.tail.suffix}` : "";
  const room = columns - widthOf(head) - GAP.length - widthOf(suffix);
  if (room >= MIN_TAIL) return `${head}${GAP}${cut(row.tail.text, room)}${suffix}`;
  if (!row.tail.droppable) return null;
  const without = `${head}${suffix}`;
  return widthOf(without) <= columns ? without : null;
}

function joined(row: RowCells): string {
  const tail = row.tail ? [row.tail.text, ...(row.tail.suffix ? [row.tail.suffix] : [])] : [];
  return [...row.cells, ...tail].join(GAP);
}

// `text` in at most `columns` cells, ending in "…" when cut; cut text is shown as the terminal would show it.
function cut(text: string, columns: number): string {
  if (widthOf(text) <= columns) return text;
  let kept = "";
  for (const char of printable(text)) {
    if (Bun.stringWidth(kept + char) > columns - 1) break;
    kept += char;
  }
  return kept + ELLIPSIS;
}

// Prose in lines of at most `columns` cells, broken between words; a word wider than a line is cut.
function wrapWords(text: string, columns: number, indent = "  "): string[] {
  if (widthOf(text) <= columns) return [text];
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    const next = line === "" ? word : `${line} ${word}`;
    if (line !== "" && widthOf(next) > columns) {
      lines.push(line);
      line = `${indent}${word}`;
    } else {
      line = next;
    }
  }
  return [...lines, line].map((l) => cut(l, columns));
}

// `jobs`: one line a job. Whole (into a pipe, or on a wide terminal): id, status, steps, loss, tier@device,
// created, output name, error_code. Narrower, in this order: the date loses its year, seconds and zone,
// then tier@device, loss and the date go, the output name is cut, then the id is shortened to its first
// SHORT_ID characters (which every command that takes an ID accepts); only then does the name go. Status,
// steps and the error code stay.

interface JobCells {
  id: string;
  status: string;
  steps: string;
  loss: string;
  tier: string;
  created: string;
  name: string;
  error?: string;
}

function cellsOf(view: JobView): JobCells {
  const r = view.request;
  return {
    id: view.worker_job_id,
    status: shownStatus(view).padEnd(9),
    steps: steps(view).padStart(9),
    loss: `loss ${loss(view)}`,
    tier: `${String(r.tier)}@${String(r.device_index)}`.padEnd(10),
    created: view.created_at,
    name: String(r.output_name),
    ...(view.error_code ? { error: view.error_code } : {}),
  };
}

// "2026-11-30T06:38:12.345Z" as "11-30 06:38".
const shortDate = (iso: string) => iso.slice(5, 16).replace("T", " ");

const nameTail = (c: JobCells) => ({ text: c.name, suffix: c.error });

const shortId = (c: JobCells) => c.id.slice(0, SHORT_ID);

const LAYOUTS: Layout<JobCells>[] = [
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, c.tier, c.created], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, c.tier, shortDate(c.created)], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, c.loss, shortDate(c.created)], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps, shortDate(c.created)], tail: nameTail(c) }),
  (c) => ({ cells: [c.id, c.status, c.steps], tail: nameTail(c) }),
  (c) => ({ cells: [shortId(c), c.status, c.steps], tail: nameTail(c) }),
  (c) => ({ cells: [shortId(c), c.status, c.steps], tail: { ...nameTail(c), droppable: true } }),
];

export function jobTable(views: readonly JobView[], columns: number): string[] {
  return fitTable(views.map(cellsOf), LAYOUTS, columns);
}

// `gpu`: one row a device with a VRAM bar, its processes under it, then the co-tenants. Whole (into a pipe,
// or on a wide terminal) as below; narrower, the names lose "NVIDIA" and "GeForce", the bar shrinks, the
// used/total amounts go (free stays: admission judges by it), then the bar; process names are cut, and the
// co-tenant summary is wrapped between words.

interface GpuShape {
  shortNames: boolean;
  bar: number;
  amounts: boolean;
}

const SHAPES: GpuShape[] = [
  { shortNames: false, bar: 20, amounts: true },
  { shortNames: true, bar: 20, amounts: true },
  { shortNames: true, bar: 10, amounts: true },
  { shortNames: true, bar: 20, amounts: false },
  { shortNames: true, bar: 10, amounts: false },
  { shortNames: true, bar: 0, amounts: false },
];

type RoleLabels = Record<GpuProcessView["role"], string>;
const ROLE_LABEL: RoleLabels = { cotenant: "[co-tenant]", training: "[training: this worker's job]", other: "" };
const SHORT_ROLE_LABEL: RoleLabels = { cotenant: "[co-tenant]", training: "[training]", other: "" };

export function gpuTable(status: HostGpuStatus, columns: number): string[] {
  const deviceLayouts = SHAPES.map((shape) => deviceLayout(status.devices, shape));
  const devices = fitTable([null, ...status.devices], deviceLayouts, columns);
  const processRows = status.devices.flatMap((d) => d.processes);
  const processes = fitTable(processRows, [processRow(false), processRow(true)], columns);
  let next = 0;
  const rows = status.devices.flatMap((d, i) => [devices[i + 1]!, ...d.processes.map(() => processes[next++]!)]);
  return [devices[0]!, ...rows, ...wrapWords(cotenantLine(status), columns)];
}

// The header row is null.
function deviceLayout(devices: GpuDeviceView[], shape: GpuShape): Layout<GpuDeviceView | null> {
  const name = (d: GpuDeviceView) =>
    shape.shortNames ? d.name.replace(/^NVIDIA /, "").replace(/^GeForce /, "") : d.name;
  const nameWidth = Math.max(4, ...devices.map((d) => name(d).length));
  return (d) => {
    const cells = d === null
      ? [
        "GPU",
        "NAME".padEnd(nameWidth),
        "VRAM USED".padEnd(shape.bar),
        "USED / TOTAL".padStart(19),
        "FREE".padStart(9),
        "UTIL",
      ]
      : [
        String(d.index).padEnd(3),
        name(d).padEnd(nameWidth),
        bar(d, shape.bar),
        amounts(d).padStart(19),
        `${mib(d.memory_free_mib, 0)} MiB`.padStart(9),
        util(d),
      ];
    return { cells: cells.filter((_, i) => (i !== 2 || shape.bar > 0) && (i !== 3 || shape.amounts)) };
  };
}

function bar(d: GpuDeviceView, width: number): string {
  const used = d.memory_used_mib;
  const total = d.memory_total_mib;
  return used !== null && total ? meter(used / total, width) : "?".padEnd(width);
}

const amounts = (d: GpuDeviceView) => `${mib(d.memory_used_mib, 6)} / ${mib(d.memory_total_mib, 6)} MiB`;
const util = (d: GpuDeviceView) => (d.utilization_pct === null ? "?" : `${d.utilization_pct}%`);

function processRow(narrow: boolean): Layout<GpuProcessView> {
  const label = narrow ? SHORT_ROLE_LABEL : ROLE_LABEL;
  return (p) => ({
    cells: narrow
      ? [`  pid ${String(p.pid).padEnd(7)}`, `${mib(p.used_mib, 0)} MiB`.padStart(9)]
      : [`       pid ${String(p.pid).padEnd(8)} ${`${mib(p.used_mib, 0)} MiB`.padStart(10)}`],
    tail: { text: p.name, suffix: label[p.role] || undefined, droppable: true },
  });
}

function cotenantLine(status: HostGpuStatus): string {
  if (status.cotenants.length === 0) return "co-tenants: none";
  const list = status.cotenants
    .map((c) => `${c.name} (pid ${c.pid}, ${mib(c.used_mib, 0)} MiB) on GPU ${c.device_index}`)
    .join("; ");
  const tts = status.tts_on_3090 ? " — tts_on_3090: training on the 24 GB card competes with it" : "";
  return `co-tenants: ${list}${tts}`;
}

// On the Slurm backend the GPUs are the cluster's: one line a node, its GPUs by type as the status page shows them.
export function clusterLines(status: ClusterGpuStatus, columns: number): string[] {
  if (status.nodes.length === 0) return ["no nodes"];
  return status.nodes.flatMap((node) => {
    const gpus = node.gpus.map((g) => `${g.type ?? "gpu"}: ${g.allocated} of ${g.total} allocated`);
    return wrapWords(`${node.name} (${node.state}): ${gpus.length === 0 ? "no GPUs" : gpus.join(", ")}`, columns);
  });
}

function mib(value: number | null, width: number): string {
  return (value === null ? "?" : String(value)).padStart(width);
}
