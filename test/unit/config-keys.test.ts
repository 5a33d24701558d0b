import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { CONFIG_KEYS, keysOf } from "../../src/config/keys.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { PAGE, withTable } from "../../scripts/config-docs.ts";

// The config's keys are read off its schema: every key says what it does, and the docs' table and the
// installed config (install.test.ts) are written from that list, so neither can miss a key or drift.
describe("the config's keys", () => {
  test("every key of the parsed defaults is listed once, with a meaning, retention's included", () => {
    const listed = CONFIG_KEYS.map((k) => k.key);
    expect(new Set(listed).size).toBe(listed.length);
    // Every section of the parsed config is covered by listed keys, down to the depth each is documented at.
    const defaults = ConfigSchema.parse({}) as Record<string, unknown>;
    for (const [name, value] of Object.entries(defaults)) {
      const keys = listed.filter((k) => k === name || k.startsWith(`${name}.`));
      expect(keys.length).toBeGreaterThan(0);
      // A section's keys: those it holds by default (an optional key, unset, holds none) are all listed.
      if (!keys.includes(name)) expect(keys.map((k) => k.slice(name.length + 1))).toEqual(expect.arrayContaining(Object.keys(value as object)));
    }
    expect(listed).toEqual(expect.arrayContaining(["retention.keep_days", "retention.keep_last", "devices", "gpu.vram_need_mib"]));
    expect(CONFIG_KEYS.every((k) => k.meaning.length > 10)).toBe(true);
  });

  test("a key whose schema says nothing of its meaning is an error; contrast: the same key with one is listed", () => {
    const bare = z.strictObject({ section: z.strictObject({ quiet: z.int().default(1) }).prefault({}) });
    expect(() => keysOf(bare)).toThrow("config key section.quiet says nothing of its meaning");
    const told = z.strictObject({ section: z.strictObject({ quiet: z.int().default(1).meta({ description: "how quiet" }) }).prefault({}) });
    expect(keysOf(told)).toEqual([{ key: "section.quiet", kind: "number", env: "LORA_WORKER_SECTION_QUIET", meaning: "how quiet", toml: "1", unset: null }]);
  });

  test("docs/configuration.md's key table is the one bun run docs:config writes; contrast: a row taken out is put back", () => {
    const page = readFileSync(PAGE, "utf8");
    expect(withTable(page)).toBe(page);
    const missing = page.replace(/^\| `retention\.keep_days` .*\n/m, "");
    expect(missing).not.toBe(page);
    expect(withTable(missing)).toBe(page);
  });
});
