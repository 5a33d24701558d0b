import { readFileSync, type Stats } from "node:fs";
import { statOrNull } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";

export type TomlRead = Result<{ found: boolean; table: Record<string, unknown> }>;

// The config file as a table: absent is an empty one where no file was asked for; anything but a regular file is
// refused before it is opened (a FIFO would wait for ever, a device would read without end).
export function readToml(path: string, required: boolean): TomlRead {
  const st = statOrNull(path);
  if (st === null) {
    if (required) return fail(`config file ${path} does not exist`);
    return ok({ found: false, table: {} });
  }
  if (!st.isFile()) {
    return fail(`config file ${path} is ${kindOf(st)}, not a regular file: name the config file itself`);
  }
  const text = readFileSync(path, "utf8");
  try {
    return ok({ found: true, table: Bun.TOML.parse(text) as Record<string, unknown> });
  } catch (err) {
    const message = parseMessage(err);
    const at = tomlErrorAt(text, message);
    return fail(`config file ${path} is not valid TOML: line ${at.line}, column ${at.column}: ${message}`);
  }
}

function kindOf(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a named pipe (FIFO)";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  return st.isSocket() ? "a socket" : "not a file";
}

const parseMessage = (err: unknown) => (err as Error).message.replace(/^TOML Parse error: /, "");

// Whether the text's first `end` characters fail to parse with this very message.
function failsSo(text: string, end: number, message: string): boolean {
  try {
    Bun.TOML.parse(text.slice(0, end));
    return false;
  } catch (err) {
    return parseMessage(err) === message;
  }
}

// Bun's TOML parser says what is wrong but not where (its error's line and column are the caller's, in JS). The line
// is the first whose text up to it fails the same way, found by halving: a prefix that holds the fault fails as the
// whole does, one that stops before it does not, so ~log2(lines) parses, not one per line. The column is where the
// token the message quotes starts on it (in the value, past a key's `=`, where it is there), else its first character.
// `message` is the whole text's parse error, so the whole text fails so.
export function tomlErrorAt(text: string, message: string): { line: number; column: number } {
  const ends = lineEnds(text);
  let passes = 0; // the empty prefix parses
  let fails = ends.length;
  while (fails - passes > 1) {
    const mid = (passes + fails) >>> 1;
    if (failsSo(text, ends[mid - 1]!, message)) fails = mid;
    else passes = mid;
  }
  const line = text.slice(fails === 1 ? 0 : ends[fails - 2]! + 1, ends[fails - 1]);
  return { line: fails, column: columnOf(line, message) };
}

/** The 1-based column on the fault's line where the token the message quotes starts, else its first character. */
export function columnOf(line: string, message: string): number {
  const quoted = /'([^']+)'|"([^"]+)"/.exec(message);
  const token = quoted?.[1] ?? quoted?.[2];
  const value = line.indexOf("=") + 1;
  const places = token === undefined ? [] : [line.indexOf(token, value), line.indexOf(token)];
  const found = places.find((i) => i >= 0) ?? -1;
  return (found >= 0 ? found : line.search(/\S|$/)) + 1;
}

// Where each line ends (its newline's index, or the text's length for the last).
function lineEnds(text: string): number[] {
  const ends: number[] = [];
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) ends.push(i);
  ends.push(text.length);
  return ends;
}
