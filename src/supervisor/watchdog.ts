import type { StopReason } from "../job.ts";

const CHECK_MS = 1000;

export interface WatchdogLimits {
  stallMs: number;
  deadline: number; // epoch ms after which the run has outlived its tier's bound
}

export interface Watchdog {
  touch(): void;
  stop(): void;
}

// Trips once: on silence longer than stallMs, or at the tier's wall-clock deadline. A run that waits in a
// scheduler's queue (`waiting`) is silent by right: its silence counts from when it starts.
export function startWatchdog(limits: WatchdogLimits, trip: (reason: StopReason) => void, waiting: () => boolean = () => false, now: () => number = Date.now): Watchdog {
  let lastOutput = now();
  const timer = setInterval(() => {
    const t = now();
    if (waiting()) lastOutput = t;
    const reason: StopReason | null = t >= limits.deadline ? "timeout" : t - lastOutput >= limits.stallMs ? "stalled" : null;
    if (reason === null) return;
    clearInterval(timer);
    trip(reason);
  }, Math.min(CHECK_MS, limits.stallMs));
  return {
    touch: () => {
      lastOutput = now();
    },
    stop: () => clearInterval(timer),
  };
}
