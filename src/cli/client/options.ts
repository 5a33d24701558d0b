import { UsageError } from "../args.ts";

export interface OptionSpec {
  /** Options that take a value: `--name value` or `--name=value`. */
  values: readonly string[];
  /** Options that take none: `--name`. */
  flags: readonly string[];
  /** Short spellings, e.g. `{ f: "follow" }` for `-f`. */
  short?: Readonly<Record<string, string>>;
}

export interface ParsedOptions {
  positional: string[];
  values: Record<string, string>;
  flags: Set<string>;
}

export function parseOptions(argv: readonly string[], spec: OptionSpec): ParsedOptions {
  const parsed: ParsedOptions = { positional: [], values: {}, flags: new Set() };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--") {
      parsed.positional.push(...argv.slice(i + 1));
      break;
    }
    if (arg.startsWith("--")) i = takeLong(argv, i, spec, parsed);
    else if (/^-[A-Za-z]$/.test(arg)) takeShort(arg.slice(1), spec, parsed);
    else parsed.positional.push(arg);
  }
  return parsed;
}

function takeLong(argv: readonly string[], i: number, spec: OptionSpec, parsed: ParsedOptions): number {
  const [name, inline] = argv[i]!.slice(2).split(/=(.*)/s, 2) as [string, string | undefined];
  if (spec.flags.includes(name)) {
    if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
    parsed.flags.add(name);
    return i;
  }
  if (!spec.values.includes(name)) throw new UsageError(`unknown option --${name}`);
  const value = inline ?? argv[i + 1];
  if (value === undefined) throw new UsageError(`--${name} needs a value`);
  parsed.values[name] = value;
  return inline === undefined ? i + 1 : i;
}

function takeShort(letter: string, spec: OptionSpec, parsed: ParsedOptions): void {
  const name = spec.short?.[letter];
  if (name === undefined || !spec.flags.includes(name)) throw new UsageError(`unknown option -${letter}`);
  parsed.flags.add(name);
}

/** A positive integer option, or undefined when absent; anything else is a usage error that quotes it. */
export function positiveInt(parsed: ParsedOptions, name: string): number | undefined {
  const raw = parsed.values[name];
  if (raw === undefined) return undefined;
  if (!/^[1-9]\d{0,8}$/.test(raw)) throw new UsageError(`--${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return Number(raw);
}
