// `bun run docs:config`: the table of config keys in docs/configuration.md, written from the schema
// (src/config/keys.ts) between its two markers. test/unit/config-keys.test.ts fails while the page's table differs.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { configTable } from "../src/config/keys.ts";

export const PAGE = join(import.meta.dir, "..", "docs", "configuration.md");
export const START = "<!-- config keys: written by `bun run docs:config` from src/config/schema.ts -->";
export const END = "<!-- end of config keys -->";

export function withTable(page: string): string {
  const [from, to] = [page.indexOf(START), page.indexOf(END)];
  if (from < 0 || to < from) throw new Error(`docs/configuration.md lacks the markers ${START} … ${END}`);
  return `${page.slice(0, from + START.length)}\n${configTable()}\n${page.slice(to)}`;
}

if (import.meta.main) writeFileSync(PAGE, withTable(readFileSync(PAGE, "utf8")));
