import type { BenchWorker } from "./bench-host.ts";

export const PROBE_EVERY_MS = 10;

/**
 * Calls `each(due)` every PROBE_EVERY_MS until `done()`, whatever the answers (open loop), and waits for them all:
 * `due` is the call's scheduled moment, from which a latency counts, so a stall counts for every probe it delays.
 */
export async function onSchedule(done: () => boolean, each: (due: number) => Promise<void>): Promise<void> {
  const inFlight: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; !done(); i++) {
    const due = start + i * PROBE_EVERY_MS;
    const wait = due - performance.now();
    if (wait > 0) await Bun.sleep(wait);
    inFlight.push(each(due));
  }
  await Promise.all(inFlight);
}

// One /healthz probe every PROBE_EVERY_MS until `done()`; each latency from its scheduled moment to its answer.
export async function probeHealthz(host: BenchWorker, done: () => boolean): Promise<number[]> {
  const samples: number[] = [];
  await onSchedule(done, (due) => host.get("/healthz").then(async (res) => {
    await res.arrayBuffer();
    samples.push(performance.now() - due);
  }));
  return samples;
}
