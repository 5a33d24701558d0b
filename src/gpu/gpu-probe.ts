import { readDevices } from "./read-devices.ts";
import type { GpuProbe, ProbeResult } from "./types.ts";

export interface GpuProbeDeps {
  nvidiaSmi: string;
  timeoutMs: number;
  /** How long a result (success or failure) is served from cache, counted from when its probe finished. */
  ttlMs: number;
  now?: () => number;
}

/**
 * At most one probe runs at a time and every concurrent caller shares it. A `fresh` read skips the cache and gets a
 * probe that starts after its call: the one it starts itself, or one queued behind a probe already in flight.
 * Expiry counts from a probe's end so a wedged driver is re-probed at most once per ttl, not once per timeout.
 */
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
