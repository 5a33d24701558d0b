import type { z } from "zod";
import { ConfigSchema } from "./schema.ts";

// Every key of the config, read off ConfigSchema: the environment overrides, the "defaults in use" report, the
// docs' key table and the config install.sh writes all come from this one list.

export const ENV_PREFIX = "LORA_WORKER_";

type KeyKind = "string" | "number" | "boolean" | "list" | "table";

export interface ConfigKey {
  key: string;
  kind: KeyKind;
  /** LORA_WORKER_ + the key in upper case; null for a key too structured for one variable. */
  env: string | null;
  /** What the key does, as the schema says it (Markdown). */
  meaning: string;
  /** The default as one writes it in TOML; null when the key is unset by default. */
  toml: string | null;
  /** For a key unset by default, what the worker does then (Markdown), if it says. */
  unset: string | null;
}

interface KeyMeta {
  description?: string;
  toml?: string;
  unset?: string;
  env?: false;
}

type Schema = z.core.$ZodType;
const defOf = (schema: Schema) => schema._zod.def as z.core.$ZodTypeDef & Record<string, unknown>;
const metaOf = (schema: Schema): KeyMeta | undefined => (schema as z.ZodType).meta() as KeyMeta | undefined;

// The schema under its defaults, optionality and transforms: what the key holds as written.
function written(schema: Schema): Schema {
  const def = defOf(schema);
  if (def.type === "default" || def.type === "prefault" || def.type === "optional") {
    return written(def.innerType as Schema);
  }
  if (def.type === "pipe") return written(def.in as Schema);
  return schema;
}

function kindOf(schema: Schema, meta: KeyMeta): KeyKind {
  const base = defOf(written(schema));
  if (base.type === "string" || base.type === "enum") return "string";
  if (base.type === "number") return "number";
  if (base.type === "boolean") return "boolean";
  if (base.type === "array" && defOf(written(base.element as Schema)).type === "string" && meta.env !== false) {
    return "list";
  }
  return "table";
}

// A key with a description is a documented key; a table without one is walked into. Anything else is a key
// nobody said the meaning of: an error in the schema, caught by the first test that lists the keys.
function walk(shape: Record<string, Schema>, prefix: string, defaults: Record<string, unknown>): ConfigKey[] {
  return Object.entries(shape).flatMap(([name, field]) => {
    const key = prefix === "" ? name : `${prefix}.${name}`;
    const meta = metaOf(field);
    if (meta?.description !== undefined) {
      const kind = kindOf(field, meta);
      const value = defaults[name];
      return [{
        key,
        kind,
        env: kind === "table" ? null : ENV_PREFIX + key.replaceAll(".", "_").toUpperCase(),
        meaning: meta.description,
        toml: meta.toml ?? (value === undefined ? null : tomlValue(value)),
        unset: meta.unset ?? null,
      }];
    }
    const inner = written(field);
    if (defOf(inner).type !== "object") throw new Error(`config key ${key} says nothing of its meaning`);
    const shapeOf = (inner as unknown as { shape: Record<string, Schema> }).shape;
    return walk(shapeOf, key, (defaults[name] ?? {}) as Record<string, unknown>);
  });
}

export function keysOf(schema: z.ZodObject): ConfigKey[] {
  return walk(schema.shape as Record<string, Schema>, "", schema.parse({}) as Record<string, unknown>);
}

export const CONFIG_KEYS: readonly ConfigKey[] = keysOf(ConfigSchema);

// A value as TOML writes it inline.
function tomlValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return `[${value.map(tomlValue).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  return `{ ${entries.map(([k, v]) => `${k} = ${tomlValue(v)}`).join(", ")} }`;
}

const COMMENT_COLUMNS = 100;

// Markdown as a comment reads it: no backticks, a link's text without its target.
const plain = (text: string) => text.replaceAll("`", "").replace(/\[([^\]]+)\]\([^)]*\)/g, "$1");

function commentLines(text: string): string[] {
  const lines: string[] = [];
  let line = "#";
  for (const word of plain(text).split(" ")) {
    if (line.length + 1 + word.length > COMMENT_COLUMNS && line !== "#") {
      lines.push(line);
      line = "#";
    }
    line += ` ${word}`;
  }
  return [...lines, line];
}

/** The config install.sh writes: every key commented out at its default, under its meaning. */
export function configTemplate(keys: readonly ConfigKey[] = CONFIG_KEYS): string {
  const head = [
    "# lora-worker configuration, written once by install.sh and never overwritten by it.",
    "# Every key is here, commented out at its default, under what it does: a key left out takes its default",
    "# (listed in /healthz as config_defaults_in_use). Uncomment and edit a line to change it; then",
    "# systemctl restart lora-worker. `lora-worker doctor` checks the result.",
  ];
  const tables = [...new Set(keys.filter((k) => k.key.includes(".")).map((k) => k.key.split(".")[0]!))];
  const block = (k: ConfigKey, name: string) => [
    "#",
    ...commentLines(k.meaning),
    k.toml === null ? `# ${name} = (unset${k.unset === null ? "" : `: ${plain(k.unset)}`})` : `# ${name} = ${k.toml}`,
  ];
  const top = keys.filter((k) => !k.key.includes(".")).flatMap((k) => block(k, k.key));
  const sections = tables.flatMap((table) => [
    "",
    `[${table}]`,
    ...keys.filter((k) => k.key.startsWith(`${table}.`)).flatMap((k) => block(k, k.key.slice(table.length + 1))),
  ]);
  return `${[...head, ...top, ...sections].join("\n")}\n`;
}

/** The docs' key table (Markdown rows under its header). */
export function configTable(keys: readonly ConfigKey[] = CONFIG_KEYS): string {
  const fallback = (k: ConfigKey) => (k.unset === null ? "unset" : `unset: ${k.unset}`);
  const rows = keys.map((k) => `| \`${k.key}\` | ${k.toml === null ? fallback(k) : `\`${k.toml}\``} | ${k.meaning} |`);
  return ["| key | default | meaning |", "| --- | --- | --- |", ...rows].join("\n");
}
