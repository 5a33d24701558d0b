import type { BenchWorker } from "./bench-host.ts";

export const PROBE_EVERY_MS = 10;

// One /healthz probe every PROBE_EVERY_MS until `done()`; each latency from its scheduled moment to its answer,
// so a stall counts for every probe it delays.
export async function probeHealthz(host: BenchWorker, done: () => boolean): Promise<number[]> {
  const samples: number[] = [];
  const inFlight: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; !done(); i++) {
    const due = start + i * PROBE_EVERY_MS;
    const wait = due - performance.now();
    if (wait > 0) await Bun.sleep(wait);
    inFlight.push(host.get("/healthz").then(async (res) => {
      await res.arrayBuffer();
      samples.push(performance.now() - due);
    }));
  }
  await Promise.all(inFlight);
  return samples;
}
