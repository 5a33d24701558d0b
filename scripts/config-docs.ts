// `bun run docs:config`: README's table of config keys, written from the schema (src/config/keys.ts) between its
// two markers. test/config-keys.test.ts fails while the README's table differs from what this writes.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { configTable } from "../src/config/keys.ts";

export const README = join(import.meta.dir, "..", "README.md");
export const START = "<!-- config keys: written by `bun run docs:config` from src/config/schema.ts -->";
export const END = "<!-- end of config keys -->";

export function withTable(readme: string): string {
  const [from, to] = [readme.indexOf(START), readme.indexOf(END)];
  if (from < 0 || to < from) throw new Error(`README.md lacks the markers ${START} … ${END}`);
  return `${readme.slice(0, from + START.length)}\n${configTable()}\n${readme.slice(to)}`;
}

if (import.meta.main) writeFileSync(README, withTable(readFileSync(README, "utf8")));
