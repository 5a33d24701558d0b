import { columnOf } from "../../src/config/toml.ts";

// The line finder before issue 48 (src/config/load.ts at 26988a7), kept as the bench's baseline: it parsed every
// prefix of lines until one failed as the whole file did (the column is found as the current one finds it).
export function tomlErrorAtBefore(text: string, message: string): { line: number; column: number } | null {
  const lines = text.split("\n");
  for (let n = 1; n <= lines.length; n++) {
    try {
      Bun.TOML.parse(lines.slice(0, n).join("\n"));
    } catch (err) {
      if ((err as Error).message.replace(/^TOML Parse error: /, "") !== message) continue;
      return { line: n, column: columnOf(lines[n - 1]!, message) };
    }
  }
  return null;
}
