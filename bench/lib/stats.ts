// Order statistics over latency samples; nearest-rank, so a p99 is a sample that was actually seen.
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export const median = (samples: readonly number[]): number => percentile(samples, 50);

export function summarize(samples: readonly number[]) {
  return { n: samples.length, p50: percentile(samples, 50), p90: percentile(samples, 90), p99: percentile(samples, 99), max: percentile(samples, 100) };
}

export type Summary = ReturnType<typeof summarize>;

export function ms(value: number): string {
  return value < 10 ? `${value.toFixed(2)} ms` : value < 100 ? `${value.toFixed(1)} ms` : `${Math.round(value)} ms`;
}

export function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}

export function ratio(value: number): string {
  return Number.isFinite(value) ? value.toPrecision(3) : "—";
}

export function count(value: number): string {
  return Math.round(value).toLocaleString("en-US");
}
