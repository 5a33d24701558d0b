// The line finder before issue 48 (src/config/load.ts at 26988a7), kept as the bench's baseline: it parsed every
// prefix of lines until one failed as the whole file did.
export function tomlErrorAtBefore(text: string, message: string): { line: number; column: number } | null {
  const lines = text.split("\n");
  for (let n = 1; n <= lines.length; n++) {
    try {
      Bun.TOML.parse(lines.slice(0, n).join("\n"));
    } catch (err) {
      if ((err as Error).message.replace(/^TOML Parse error: /, "") !== message) continue;
      const line = lines[n - 1]!;
      const quoted = /'([^']+)'|"([^"]+)"/.exec(message);
      const token = quoted?.[1] ?? quoted?.[2];
      const value = line.indexOf("=") + 1;
      const places = token === undefined ? [] : [line.indexOf(token, value), line.indexOf(token)];
      const found = places.find((i) => i >= 0) ?? -1;
      return { line: n, column: (found >= 0 ? found : line.search(/\S|$/)) + 1 };
    }
  }
  return null;
}
