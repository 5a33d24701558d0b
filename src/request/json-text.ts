import { type DetailItem, fieldPathError } from "./schema.ts";

// What the text of a JSON request shows and its parsed value no longer can. Every number of a request is an
// integer: `10.0` parses to 10, so a client that sends it holds a float where an integer belongs, and is told
// rather than silently rounded; JSON.parse keeps the last of a repeated key, so the caller is told of that too.

export const MAX_JSON_DEPTH = 32;

/** The text nests too deep to be parsed at all, or the 422 items of what only the text shows. */
export type JsonTextScan = { tooDeep: true } | { tooDeep: false; faults: DetailItem[] };

export function scanJsonText(text: string): JsonTextScan {
  const scan = scanJson(text);
  if (scan.tooDeep) return scan;
  const repeated = "appears more than once in the object; each key may appear once";
  const faults = [
    ...scan.duplicateKeys.map((key) => fieldPathError(key, repeated, "duplicate_key")),
    ...scan.nonIntegerNumbers.map(({ path, literal }) =>
      fieldPathError(path, `must be an integer, got the number literal ${literal}`, "type_error")),
  ];
  return { tooDeep: false, faults };
}

type JsonPath = Array<string | number>;
type JsonScan =
  | { tooDeep: true }
  | { tooDeep: false; duplicateKeys: JsonPath[]; nonIntegerNumbers: Array<{ path: JsonPath; literal: string }> };

interface Frame {
  keys: Set<string> | null; // null for an array
  at: string | number; // the key or index of the value being read
  expectKey: boolean;
}

// One pass over the raw text, before JSON.parse, for what the parsed value can no longer tell:
// how deep it nests, every key an object repeats (JSON.parse silently keeps the last), and every
// number written as a fraction or exponent (`10.0` and `1e2` parse to integers; `1e400` to Infinity).
function scanJson(text: string): JsonScan {
  const stack: Frame[] = [];
  const duplicateKeys: JsonPath[] = [];
  const nonIntegerNumbers: Array<{ path: JsonPath; literal: string }> = [];
  const here = () => stack.map((f) => f.at);
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    const top = stack[stack.length - 1];
    if (ch === '"') {
      const end = stringEnd(text, i);
      if (top?.keys && top.expectKey) {
        top.expectKey = false;
        const key = decodeKey(text.slice(i, end + 1));
        if (key !== null) top.at = key;
        if (key !== null && top.keys.has(key)) duplicateKeys.push(here());
        if (key !== null) top.keys.add(key);
      }
      i = end;
    } else if (ch === "{" || ch === "[") {
      if (stack.length >= MAX_JSON_DEPTH) return { tooDeep: true };
      stack.push({ keys: ch === "{" ? new Set() : null, at: ch === "{" ? "" : 0, expectKey: ch === "{" });
    } else if (ch === "}" || ch === "]") {
      stack.pop();
    } else if (ch === "," && top) {
      if (top.keys) top.expectKey = true;
      else top.at = (top.at as number) + 1;
    } else if (/[-0-9]/.test(ch)) {
      const literal = /^-?[0-9.eE+-]+/.exec(text.slice(i, i + 400))![0];
      if (/[.eE]/.test(literal)) nonIntegerNumbers.push({ path: here(), literal: literal.slice(0, 40) });
      i += literal.length - 1;
    }
  }
  return { tooDeep: false, duplicateKeys, nonIntegerNumbers };
}

// Index of the closing quote, honouring backslash escapes; the end of the text if it never closes.
function stringEnd(text: string, open: number): number {
  for (let j = open + 1; j < text.length; j++) {
    if (text[j] === "\\") j++;
    else if (text[j] === '"') return j;
  }
  return text.length;
}

function decodeKey(literal: string): string | null {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return null; // malformed: JSON.parse of the whole body answers 400
  }
}
