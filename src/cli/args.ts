import { parseArgs as tokenize, type ParseArgsOptionsConfig } from "node:util";
import { didYouMean } from "../suggest.ts";

export class UsageError extends Error {}

interface OptionSpec {
  // Options that take a value: `--name value` or `--name=value`.
  values: readonly string[];
  // Options that take none: `--name`.
  flags?: readonly string[];
  // Short spellings of flags, e.g. `{ f: "follow" }` for `-f`.
  short?: Readonly<Record<string, string>>;
}

export interface ParsedArgs {
  positional: string[];
  values: Record<string, string>;
  flags: Set<string>;
}

// node:util splits the words (`--name=value`, `--name value`, `-f`, `--` ends the options); the messages are
// ours, so it runs unstrict and every option word is judged against the spec here.
export function parseArgs(argv: readonly string[], spec: OptionSpec): ParsedArgs {
  const flags = spec.flags ?? [];
  const options: ParseArgsOptionsConfig = {};
  for (const name of spec.values) options[name] = { type: "string" };
  for (const name of flags) options[name] = { type: "boolean" };
  for (const [letter, name] of Object.entries(spec.short ?? {})) {
    if (flags.includes(name)) options[name] = { type: "boolean", short: letter };
  }
  const { tokens } = tokenize({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  const parsed: ParsedArgs = { positional: [], values: {}, flags: new Set() };
  let argumentWord = -1;
  for (const token of tokens) {
    if (token.kind === "positional") parsed.positional.push(token.value);
    if (token.kind !== "option") continue;
    // Only a lone "-f" is a short option: "-5" or "-fx" stays an argument (node:util would read letters in it).
    if (isArgumentWord(argv[token.index]!)) {
      if (token.index !== argumentWord) parsed.positional.push(argv[token.index]!);
      argumentWord = token.index;
      continue;
    }
    if (flags.includes(token.name)) {
      if (token.inlineValue) throw new UsageError(`--${token.name} takes no value`);
      parsed.flags.add(token.name);
      continue;
    }
    if (!spec.values.includes(token.name)) {
      const known = [...spec.values, ...flags].map((name) => `--${name}`);
      throw new UsageError(`unknown option ${token.rawName}${didYouMean(token.rawName, known)}`);
    }
    if (token.value === undefined) throw new UsageError(`--${token.name} needs a value`);
    parsed.values[token.name] = token.value;
  }
  return parsed;
}

function isArgumentWord(word: string): boolean {
  return /^-[^-]/.test(word) && !/^-[A-Za-z]$/.test(word);
}

// A positive integer option, or undefined when absent; anything else is a usage error that quotes it.
export function positiveInt(parsed: ParsedArgs, name: string): number | undefined {
  const raw = parsed.values[name];
  if (raw === undefined) return undefined;
  if (!/^[1-9]\d{0,8}$/.test(raw)) {
    throw new UsageError(`--${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}
