import { configTemplate } from "../../src/config/keys.ts";

const MIB = 1024 * 1024;

// A config about `bytes` long: `head` (top-level keys), the template's own comment lines over and over, then
// `tail` (the tables, where a test puts its fault) as its last lines.
export function bigConfig(head: string, tail: string, bytes = MIB): string {
  const comments = configTemplate().split("\n").filter((l) => l.startsWith("#")).join("\n");
  const repeats = Math.ceil((bytes - head.length - tail.length) / (comments.length + 1));
  return `${head}${`${comments}\n`.repeat(Math.max(repeats, 1))}${tail}`;
}

/** The 1-based line of the file that `line` is, searched from the end. */
export function lineOf(text: string, line: string): number {
  return text.split("\n").lastIndexOf(line) + 1;
}
