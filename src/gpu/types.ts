export interface GpuProcess {
  pid: number;
  name: string;
  used_mib: number | null;
}

export interface GpuDevice {
  index: number;
  name: string;
  uuid: string;
  memory_total_mib: number | null;
  memory_used_mib: number | null;
  memory_free_mib: number | null;
  utilization_pct: number | null;
  processes: GpuProcess[];
}

/** `probed_at` is ms since the epoch, taken when the probe finished. */
export type ProbeResult =
  | { ok: true; devices: GpuDevice[]; probed_at: number }
  | { ok: false; detail: string; probed_at: number };

export interface GpuProbe {
  read(options?: { fresh?: boolean }): Promise<ProbeResult>;
  /** The latest result, however old, without starting a run: for answers that must never wait on nvidia-smi. */
  last(): ProbeResult | null;
  /** Probe runs started so far; each run starts two nvidia-smi processes (devices, then compute apps). */
  runs(): number;
  /** Probe runs that ended in a failure (missing, non-zero exit, timeout, garbage). */
  failures(): number;
}
