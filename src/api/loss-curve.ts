import type { LossPoint } from "../job.ts";

// Largest-Triangle-Three-Buckets: keeps first and last point, and from each bucket the point that
// spans the largest triangle with its neighbours, so peaks and the curve's shape survive.
export function downsample(points: ReadonlyArray<[number, number]>, max: number): Array<[number, number]> {
  if (points.length <= max || max < 3) return points.slice(0, Math.max(max, 0)) as Array<[number, number]>;
  const out: Array<[number, number]> = [points[0]!];
  const size = (points.length - 2) / (max - 2);
  let prev = points[0]!;
  for (let b = 0; b < max - 2; b++) {
    const start = Math.floor(b * size) + 1;
    const end = Math.floor((b + 1) * size) + 1;
    const next = average(points, end, Math.min(Math.floor((b + 2) * size) + 1, points.length));
    let best = points[start]!;
    let bestArea = -1;
    for (let i = start; i < end; i++) {
      const p = points[i]!;
      const area = Math.abs((prev[0] - next[0]) * (p[1] - prev[1]) - (prev[0] - p[0]) * (next[1] - prev[1]));
      if (area > bestArea) [best, bestArea] = [p, area];
    }
    out.push(best);
    prev = best;
  }
  out.push(points.at(-1)!);
  return out;
}

function average(points: ReadonlyArray<[number, number]>, from: number, to: number): [number, number] {
  if (from >= to) return points.at(-1)!;
  let x = 0;
  let y = 0;
  for (let i = from; i < to; i++) [x, y] = [x + points[i]![0], y + points[i]![1]];
  return [x / (to - from), y / (to - from)];
}

// Nan steps carry no height to plot: they are counted, and only finite points are thinned.
export function lossCurve(history: LossPoint[], max: number) {
  const finite = history.filter((p): p is [number, number] => p[1] !== null);
  return { points: downsample(finite, max), total_points: history.length, nan_points: history.length - finite.length };
}
