// The slice of Python's argparse that accelerate and sd-scripts rely on: `--flag value` and
// `--flag=value`, store_true switches, int/float/choices checks, and errors printed as `usage: ...`
// then `<prog>: error: <message>` with exit status 2. Unlike argparse, abbreviations are refused:
// the worker must spell every flag in full.
import { pyStrRepr } from "./python-format.ts";

export type OptionSpec =
  | { kind: "switch" }
  | { kind: "value"; type: ValueType; choices?: readonly (string | null)[] };

export type ValueType = "str" | "int" | "float" | "int_or_float";
export type OptionValues = Map<string, string | number | true>;
export type ParseResult = { ok: true; values: OptionValues; rest: string[] } | { ok: false; message: string };

export const ARGPARSE_ERROR_EXIT = 2;
// argparse wraps usage at $COLUMNS - 2, and $COLUMNS defaults to 80.
const USAGE_WIDTH = 78;

// With `stopAtPositional`, parsing ends at the first non-flag and `rest` holds it and all after it
// (argparse.REMAINDER); otherwise every non-flag is an unrecognized argument.
export function parseOptions(args: string[], specs: Record<string, OptionSpec>, stopAtPositional: boolean): ParseResult {
  const values: OptionValues = new Map();
  const unrecognized: string[] = [];
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index]!;
    if (!arg.startsWith("-")) {
      if (stopAtPositional) return finish(values, unrecognized, args.slice(index));
      unrecognized.push(arg);
      continue;
    }
    const [flag = "", inline] = splitInline(arg);
    const spec = specs[flag.replace(/^--/, "")];
    if (!flag.startsWith("--") || spec === undefined) {
      unrecognized.push(arg);
      continue;
    }
    if (spec.kind === "switch") {
      if (inline !== undefined) return fail(`argument ${flag}: ignored explicit argument ${pyStrRepr(inline)}`);
      values.set(flag.slice(2), true);
      continue;
    }
    const raw = inline ?? takeValue(args[index + 1]);
    if (raw === undefined) return fail(`argument ${flag}: expected one argument`);
    if (inline === undefined) index += 1;
    const converted = convert(raw, spec.type);
    if (converted === undefined) return fail(`argument ${flag}: invalid ${spec.type} value: ${pyStrRepr(raw)}`);
    if (spec.choices !== undefined && !spec.choices.includes(raw)) {
      const allowed = spec.choices.map((choice) => (choice === null ? "None" : pyStrRepr(choice))).join(", ");
      return fail(`argument ${flag}: invalid choice: ${pyStrRepr(raw)} (choose from ${allowed})`);
    }
    values.set(flag.slice(2), converted);
  }
  return finish(values, unrecognized, []);
}

// What argparse.error() writes to stderr before exiting 2.
export function formatArgparseError(prog: string, specs: Record<string, OptionSpec>, positionals: string[], message: string): string {
  return `${formatUsage(prog, specs, positionals)}\n${prog}: error: ${message}\n`;
}

function formatUsage(prog: string, specs: Record<string, OptionSpec>, positionals: string[]): string {
  const optionals = Object.entries(specs).map(([name, spec]) => `[--${name}${spec.kind === "value" ? ` ${metavar(name, spec)}` : ""}]`);
  const indent = " ".repeat("usage: ".length + prog.length + 1);
  const lines = wrap([prog, ...optionals], indent, "usage: ".length - 1);
  lines[0] = lines[0]!.slice(indent.length);
  return `usage: ${[...lines, ...wrap(positionals, indent, indent.length - 1)].join("\n")}`;
}

function wrap(parts: string[], indent: string, startLength: number): string[] {
  const lines: string[] = [];
  let line: string[] = [];
  let length = startLength;
  for (const part of parts) {
    if (length + 1 + part.length > USAGE_WIDTH && line.length > 0) {
      lines.push(indent + line.join(" "));
      line = [];
      length = indent.length - 1;
    }
    line.push(part);
    length += part.length + 1;
  }
  if (line.length > 0) lines.push(indent + line.join(" "));
  return lines;
}

function metavar(name: string, spec: Extract<OptionSpec, { kind: "value" }>): string {
  if (spec.choices === undefined) return name.toUpperCase();
  return `{${spec.choices.map((choice) => choice ?? "None").join(",")}}`;
}

function splitInline(arg: string): [string, string | undefined] {
  const equals = arg.indexOf("=");
  return equals < 0 ? [arg, undefined] : [arg.slice(0, equals), arg.slice(equals + 1)];
}

// argparse reads a following "-x" as the next flag unless it looks like a negative number.
function takeValue(next: string | undefined): string | undefined {
  if (next === undefined || (next.startsWith("-") && !/^-\d+$|^-\d*\.\d+$/.test(next))) return undefined;
  return next;
}

// Python's int() and float() accept surrounding whitespace and "_" between digits.
function convert(raw: string, type: ValueType): string | number | undefined {
  if (type === "str") return raw;
  const text = raw.trim().replace(/(?<=\d)_(?=\d)/g, "");
  const isInt = /^[+-]?\d+$/.test(text);
  if (type === "int") return isInt ? Number(text) : undefined;
  if (type === "int_or_float" && isInt) return Number(text);
  if (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(text)) return Number(text);
  if (/^[+-]?nan$/i.test(text)) return Number.NaN;
  if (/^[+-]?inf(inity)?$/i.test(text)) return text.startsWith("-") ? -Infinity : Infinity;
  return undefined;
}

function finish(values: OptionValues, unrecognized: string[], rest: string[]): ParseResult {
  if (unrecognized.length > 0) return fail(`unrecognized arguments: ${unrecognized.join(" ")}`);
  return { ok: true, values, rest };
}

function fail(message: string): ParseResult {
  return { ok: false, message };
}
