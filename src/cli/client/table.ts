import { meter } from "./format.ts";
import { printable } from "../../printable.ts";
import type { ClusterGpuStatus, GpuDeviceView, GpuProcessView, HostGpuStatus } from "./worker-client.ts";

// Tables fitted to a terminal's width. A layout is one way to show a row, and a table lists them widest
// first: the first layout in which every row fits is used for all rows, each column padded to its widest
// cell so they line up. After the cells a row may have a tail: text cut with "…" to leave room for a suffix
// (the suffixes line up too); a tail marked `droppable` may go when even its cut form does not fit, else the
// row does not fit that layout. Into a pipe the width is unbounded and the first layout is always the one used.

export interface RowCells {
  cells: string[];
  tail?: { text: string; suffix?: string; droppable?: boolean };
}

export type Layout<Row> = (row: Row) => RowCells;

const GAP = "  ";
const ELLIPSIS = "…";
// A tail cut shorter than this says too little: it is dropped instead (or the row does not fit).
const MIN_TAIL = 8;

// What `text` takes on a terminal, where control characters are shown in caret notation.
const widthOf = (text: string): number => Bun.stringWidth(printable(text));

export function fitTable<Row>(rows: readonly Row[], layouts: readonly Layout<Row>[], columns: number): string[] {
  for (const layout of layouts) {
    const table = aligned(rows.map(layout));
    const lines = table.rows.map((row) => fitRow(row, table, columns));
    if (lines.every((line) => line !== null)) return lines as string[];
  }
  const narrowest = aligned(rows.map(layouts.at(-1)!));
  return narrowest.rows.map((row) => cut(joined(row, narrowest.tailWidth), columns));
}

interface Aligned {
  rows: RowCells[];
  // What a tail followed by a suffix is padded to, and the widest suffix: so that the suffixes line up.
  tailWidth: number;
  suffixWidth: number;
}

// Every cell padded to its column's widest, but a row's last one when nothing follows it (no trailing blanks).
function aligned(rows: RowCells[]): Aligned {
  const widths: number[] = [];
  for (const { cells } of rows) cells.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, widthOf(cell))));
  const padded = rows.map((row) => ({
    ...row,
    cells: row.cells.map((cell, i) => (i < row.cells.length - 1 || row.tail ? padTo(cell, widths[i]!) : cell)),
  }));
  const widest = (of: (row: RowCells) => string | undefined) => Math.max(0, ...rows.map((r) => widthOf(of(r) ?? "")));
  return { rows: padded, tailWidth: widest((r) => r.tail?.text), suffixWidth: widest((r) => r.tail?.suffix) };
}

const padTo = (text: string, width: number) => text + " ".repeat(Math.max(0, width - widthOf(text)));

// The row whole, else with its tail cut (or dropped, when droppable); null when it does not fit so.
function fitRow(row: RowCells, table: Aligned, columns: number): string | null {
  const whole = joined(row, table.tailWidth);
  if (widthOf(whole) <= columns) return whole;
  if (!row.tail) return null;
  const head = row.cells.join(GAP);
  const suffix = row.tail.suffix ? `${GAP}${row.tail.suffix}` : "";
  // Every row with a suffix leaves room for the widest one, so that theirs start in one column.
  const room = columns - widthOf(head) - GAP.length - (suffix ? GAP.length + table.suffixWidth : 0);
  if (room >= MIN_TAIL) return `${head}${GAP}${tailText(row.tail, Math.min(room, table.tailWidth))}${suffix}`;
  if (!row.tail.droppable) return null;
  const without = `${head}${suffix}`;
  return widthOf(without) <= columns ? without : null;
}

// A tail in at most `width` cells: cut to fit, and padded to it when a suffix follows.
function tailText(tail: NonNullable<RowCells["tail"]>, width: number): string {
  const text = cut(tail.text, width);
  return tail.suffix ? padTo(text, width) : text;
}

function joined(row: RowCells, tailWidth: number): string {
  const tail = row.tail ? [tailText(row.tail, tailWidth), ...(row.tail.suffix ? [row.tail.suffix] : [])] : [];
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
