// Enough for nvidia-smi's longest one-line errors (~150 chars) while keeping garbage out of logs and responses.
const MAX_LINE_CHARS = 240;

/** The first line with something on it, trimmed and truncated, or undefined when there is none. */
export function firstLine(text: string): string | undefined {
  const line = text.split(/\r?\n/).find((candidate) => candidate.trim() !== "");
  return line === undefined ? undefined : truncateLine(line.trim());
}

export function truncateLine(line: string): string {
  return line.length <= MAX_LINE_CHARS ? line : `${line.slice(0, MAX_LINE_CHARS)}…`;
}
