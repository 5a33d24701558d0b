import type { StopReason } from "../job.ts";

// Until the trainer's first words (the run may still be in a scheduler's queue), the watchdog looks this often.
const QUEUED_CHECK_MS = 1000;

// Trips once: on silence longer than stallMs, or at the tier's wall-clock deadline (epoch ms). Once the trainer
// has spoken it wakes only when one of the two is due, and reads the trainer's output first (`look`), so output
// not yet read counts. Before that the run may be waiting in a scheduler's queue (`waiting`), silent by right: it
// looks every QUEUED_CHECK_MS, so silence counts from (nearly) when the run starts.
export function startWatchdog(
  limits: { stallMs: number; deadline: number },
  trip: (reason: StopReason) => void,
  waiting: () => boolean,
  look: () => void,
) {
  let lastOutput = Date.now();
  let heard = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  const arm = (t: number) => {
    const due = Math.min(lastOutput + limits.stallMs, limits.deadline, heard ? Infinity : t + QUEUED_CHECK_MS);
    // Never past stallMs away (at most a day, by the config's bound): within setTimeout's range.
    timer = setTimeout(check, Math.max(0, due - t));
  };
  const check = () => {
    timer = null;
    look();
    const t = Date.now();
    if (waiting()) lastOutput = t;
    const stalled = t - lastOutput >= limits.stallMs;
    const reason: StopReason | null = t >= limits.deadline ? "timeout" : stalled ? "stalled" : null;
    if (reason === null) return arm(t);
    trip(reason);
  };
  arm(lastOutput);
  return {
    touch: () => {
      lastOutput = Date.now();
      heard = true;
    },
    stop: () => {
      if (timer) clearTimeout(timer);
      timer = null;
    },
  };
}
