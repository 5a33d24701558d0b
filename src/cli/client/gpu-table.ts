import { meter } from "./format.ts";
import { fitTable, wrapWords, type Layout } from "./table.ts";
import type { GpuDeviceView, GpuProcessView, GpuStatus } from "./worker-client.ts";

// `gpu`: one row a device with a VRAM bar, its processes under it, then the co-tenants. Whole (into a pipe,
// or on a wide terminal) as below; narrower, the names lose "NVIDIA" and "GeForce", the bar shrinks, the
// used/total amounts go (free stays: admission judges by it), then the bar; process names are cut, and the
// co-tenant summary is wrapped between words.

interface Shape {
  shortNames: boolean;
  bar: number;
  amounts: boolean;
}

const SHAPES: Shape[] = [
  { shortNames: false, bar: 20, amounts: true },
  { shortNames: true, bar: 20, amounts: true },
  { shortNames: true, bar: 10, amounts: true },
  { shortNames: true, bar: 20, amounts: false },
  { shortNames: true, bar: 10, amounts: false },
  { shortNames: true, bar: 0, amounts: false },
];

const ROLE_LABEL: Record<GpuProcessView["role"], string> = { cotenant: "[co-tenant]", training: "[training: this worker's job]", other: "" };
const SHORT_ROLE_LABEL: Record<GpuProcessView["role"], string> = { cotenant: "[co-tenant]", training: "[training]", other: "" };

export function gpuTable(status: GpuStatus, columns: number): string[] {
  const devices = fitTable([null, ...status.devices], SHAPES.map((shape) => deviceLayout(status.devices, shape)), columns);
  const processes = fitTable(status.devices.flatMap((d) => d.processes), [processRow(false), processRow(true)], columns);
  let next = 0;
  const rows = status.devices.flatMap((d, i) => [devices[i + 1]!, ...d.processes.map(() => processes[next++]!)]);
  return [devices[0]!, ...rows, ...wrapWords(cotenantLine(status), columns)];
}

// The header row is null.
function deviceLayout(devices: GpuDeviceView[], shape: Shape): Layout<GpuDeviceView | null> {
  const name = (d: GpuDeviceView) => (shape.shortNames ? d.name.replace(/^NVIDIA /, "").replace(/^GeForce /, "") : d.name);
  const nameWidth = Math.max(4, ...devices.map((d) => name(d).length));
  return (d) => {
    const cells = d === null
      ? ["GPU", "NAME".padEnd(nameWidth), "VRAM USED".padEnd(shape.bar), "USED / TOTAL".padStart(19), "FREE".padStart(9), "UTIL"]
      : [String(d.index).padEnd(3), name(d).padEnd(nameWidth), bar(d, shape.bar), amounts(d).padStart(19), `${mib(d.memory_free_mib, 0)} MiB`.padStart(9), util(d)];
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
    cells: narrow ? [`  pid ${String(p.pid).padEnd(7)}`, `${mib(p.used_mib, 0)} MiB`.padStart(9)] : [`       pid ${String(p.pid).padEnd(8)} ${`${mib(p.used_mib, 0)} MiB`.padStart(10)}`],
    tail: { text: p.name, suffix: label[p.role] || undefined },
  });
}

function cotenantLine(status: GpuStatus): string {
  if (status.cotenants.length === 0) return "co-tenants: none";
  const list = status.cotenants.map((c) => `${c.name} (pid ${c.pid}, ${mib(c.used_mib, 0)} MiB) on GPU ${c.device_index}`).join("; ");
  return `co-tenants: ${list}${status.tts_on_3090 ? " — tts_on_3090: training on the 24 GB card competes with it" : ""}`;
}

function mib(value: number | null, width: number): string {
  return (value === null ? "?" : String(value)).padStart(width);
}
