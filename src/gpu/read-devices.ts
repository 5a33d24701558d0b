import { type CsvLayout, parseHeaderless, type RowsResult } from "./csv-records.ts";
import { joinDevices } from "./device-list.ts";
import { DEVICE_QUERY, toDeviceRow } from "./device-rows.ts";
import { truncateLine } from "./output-lines.ts";
import { parseProcessRows, PROCESS_QUERY } from "./process-rows.ts";
import { runNvidiaSmi } from "./run-nvidia-smi.ts";
import type { ProbeResult } from "./types.ts";

export interface ReadDevicesDeps {
  nvidiaSmi: string;
  timeoutMs: number;
  now: () => number;
}

type QueryResult<T> = { ok: true; rows: T[] } | { ok: false; detail: string };

/** One probe: both queries at once, so a hung driver costs one timeout, not two, and the two views are simultaneous. */
export async function readDevices(deps: ReadDevicesDeps): Promise<ProbeResult> {
  const [devices, processes] = await Promise.all([
    query(deps, "--query-gpu", DEVICE_QUERY, (text) => parseHeaderless(text, DEVICE_QUERY, toDeviceRow)),
    query(deps, "--query-compute-apps", PROCESS_QUERY, parseProcessRows),
  ]);
  const probed_at = deps.now();
  if (!devices.ok) return { ok: false, detail: devices.detail, probed_at };
  if (!processes.ok) return { ok: false, detail: processes.detail, probed_at };
  return { ok: true, devices: joinDevices(devices.rows, processes.rows), probed_at };
}

async function query<T>(
  deps: ReadDevicesDeps,
  flag: string,
  layout: CsvLayout,
  parse: (text: string) => RowsResult<T>,
): Promise<QueryResult<T>> {
  const args = [`${flag}=${layout.fields.join(",")}`, "--format=csv,noheader,nounits"];
  const outcome = await runNvidiaSmi({ path: deps.nvidiaSmi, args, timeoutMs: deps.timeoutMs });
  if (!outcome.ok) return outcome;
  const parsed = parse(outcome.stdout);
  return parsed.ok ? parsed : { ok: false, detail: `unparseable nvidia-smi output: ${truncateLine(parsed.line.trim())}` };
}
