import type { TensorEntry } from "./header.ts";

// The tensors' data_offsets must tile the data area exactly: starting at 0, no gaps, no overlaps, ending at
// EOF. A file that breaks this is what a crashed or truncated save leaves behind. null: it tiles.
export function checkLayout(tensors: readonly TensorEntry[], dataBytes: number): string | null {
  if (tensors.length === 0) return "no tensors";
  const sorted = tensors.toSorted((a, b) => a.begin - b.begin || a.end - b.end);
  for (const [index, tensor] of sorted.entries()) {
    const previous = sorted[index - 1];
    const covered = previous?.end ?? 0;
    if (tensor.begin > covered) {
      return `data bytes ${covered}..${tensor.begin} before tensor '${tensor.name}' belong to no tensor`;
    }
    if (previous !== undefined && tensor.begin < covered) {
      return `tensor '${tensor.name}' starts at data byte ${tensor.begin}, inside tensor '${previous.name}' which ends at ${covered}`;
    }
  }
  // Sorted by begin with no overlaps, so the last tensor ends furthest.
  const covered = sorted.at(-1)?.end ?? 0;
  if (covered > dataBytes) return `tensors end at data byte ${covered} but the data area holds only ${dataBytes} bytes`;
  if (covered < dataBytes) return `data area holds ${dataBytes - covered} bytes after the last tensor ends at ${covered}`;
  return null;
}
