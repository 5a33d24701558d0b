import { fail, ok, type Result } from "../result.ts";
import {
  type CsvLayout,
  DEVICE_QUERY,
  type DeviceRow,
  parseHeaderless,
  parseProcessRows,
  PROCESS_QUERY,
  type GpuDevice,
  type GpuProcess,
  type ProcessRow,
  runNvidiaSmi,
  toDeviceRow,
  truncateLine,
} from "./nvidia-smi.ts";

interface GpuProbeDeps {
  nvidiaSmi: string;
  timeoutMs: number;
  // How long a result (success or failure) is served from cache, counted from when its probe finished.
  ttlMs: number;
  now?: () => number;
}

// At most one probe runs at a time and every concurrent caller shares it. A `fresh` read skips the cache and gets
// a probe that starts after its call: the one it starts itself, or one queued behind a probe already in flight.
// Expiry counts from a probe's end so a wedged driver is re-probed at most once per ttl, not once per timeout.
export function createGpuProbe(deps: GpuProbeDeps): GpuProbe {
  const now = deps.now ?? Date.now;
  let started = 0;
  let failed = 0;
  let cached: ProbeResult | undefined;
  let inFlight: Promise<ProbeResult> | undefined;
  let queued: Promise<ProbeResult> | undefined;

  function start(): Promise<ProbeResult> {
    started += 1;
    const run = readDevices({ nvidiaSmi: deps.nvidiaSmi, timeoutMs: deps.timeoutMs, now }).then((result) => {
      if (!result.ok) failed += 1;
      return (cached = result);
    });
    inFlight = run.finally(() => (inFlight = undefined));
    return inFlight;
  }

  function startAfterInFlight(): Promise<ProbeResult> {
    if (inFlight === undefined) return start();
    queued ??= inFlight.then(() => {
      queued = undefined;
      return start();
    });
    return queued;
  }

  function isFresh(result: ProbeResult): boolean {
    return now() - result.probed_at < deps.ttlMs;
  }

  return {
    read(options) {
      if (options?.fresh) return startAfterInFlight();
      if (cached !== undefined && isFresh(cached)) return Promise.resolve(cached);
      return inFlight ?? start();
    },
    last: () => cached ?? null,
    runs: () => started,
    failures: () => failed,
  };
}

interface ReadDevicesDeps {
  nvidiaSmi: string;
  timeoutMs: number;
  now: () => number;
}

// One probe: both queries at once, so a hung driver costs one timeout, not two, and the two views are
// simultaneous.
async function readDevices(deps: ReadDevicesDeps): Promise<ProbeResult> {
  const [devices, processes] = await Promise.all([
    query(deps, "--query-gpu", DEVICE_QUERY, (text) => parseHeaderless(text, DEVICE_QUERY, toDeviceRow)),
    query(deps, "--query-compute-apps", PROCESS_QUERY, parseProcessRows),
  ]);
  const probed_at = deps.now();
  if (!devices.ok) return { ...devices, probed_at };
  if (!processes.ok) return { ...processes, probed_at };
  return { ...ok(joinDevices(devices.value, processes.value)), probed_at };
}

async function query<T>(
  deps: ReadDevicesDeps,
  flag: string,
  layout: CsvLayout,
  parse: (text: string) => Result<T[]>,
): Promise<Result<T[]>> {
  const args = [`${flag}=${layout.fields.join(",")}`, "--format=csv,noheader,nounits"];
  const outcome = await runNvidiaSmi({ path: deps.nvidiaSmi, args, timeoutMs: deps.timeoutMs });
  if (!outcome.ok) return outcome;
  const parsed = parse(outcome.value);
  return parsed.ok ? parsed : fail(`unparseable nvidia-smi output: ${truncateLine(parsed.error.trim())}`);
}

// Devices in PCI bus order (what CUDA_DEVICE_ORDER=PCI_BUS_ID numbers by), each with its processes by UUID.
export function joinDevices(devices: readonly DeviceRow[], processes: readonly ProcessRow[]): GpuDevice[] {
  const processesOf = (row: DeviceRow) => processes.filter((process) => process.gpu_uuid === row.uuid);
  return [...devices].sort(byBusId).map((row) => toDevice(row, processesOf(row)));
}

function byBusId(a: DeviceRow, b: DeviceRow): number {
  // Bus ids are fixed-width hex, so text order is bus order once the case agrees.
  const [left, right] = [a.bus_id.toUpperCase(), b.bus_id.toUpperCase()];
  return left < right ? -1 : left > right ? 1 : a.index - b.index;
}

function toDevice(row: DeviceRow, processes: readonly ProcessRow[]): GpuDevice {
  return {
    index: row.index,
    name: row.name,
    uuid: row.uuid,
    memory_total_mib: row.memory_total_mib,
    memory_used_mib: row.memory_used_mib,
    memory_free_mib: row.memory_free_mib,
    utilization_pct: row.utilization_pct,
    processes: processes.map(({ pid, name, used_mib }) => ({ pid, name, used_mib })),
  };
}

export type { GpuDevice, GpuProcess };

/** The devices, or why nvidia-smi gave none; `probed_at` is ms since the epoch, taken when the probe finished. */
export type ProbeResult = Result<GpuDevice[]> & { probed_at: number };

export interface GpuProbe {
  read(options?: { fresh?: boolean }): Promise<ProbeResult>;
  /** The latest result, however old, without starting a run: for answers that must never wait on nvidia-smi. */
  last(): ProbeResult | null;
  /** Probe runs started so far; each run starts two nvidia-smi processes (devices, then compute apps). */
  runs(): number;
  /** Probe runs that ended in a failure (missing, non-zero exit, timeout, garbage). */
  failures(): number;
}
