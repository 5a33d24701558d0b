// One pass over the raw text, before JSON.parse, for what the parsed value can no longer tell:
// how deep it nests, the first key an object repeats (JSON.parse silently keeps the last), and the
// first number written as a fraction or exponent (`10.0` and `1e2` parse to integers; `1e400` to Infinity).
export const MAX_JSON_DEPTH = 32;

export type JsonPath = Array<string | number>;
export type JsonScan = { tooDeep: true } | { tooDeep: false; duplicateKey: JsonPath | null; nonIntegerNumber: { path: JsonPath; literal: string } | null };

interface Frame {
  keys: Set<string> | null; // null for an array
  at: string | number; // the key or index of the value being read
  expectKey: boolean;
}

export function scanJson(text: string): JsonScan {
  const stack: Frame[] = [];
  let duplicateKey: JsonPath | null = null;
  let nonIntegerNumber: { path: JsonPath; literal: string } | null = null;
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
        if (key !== null && top.keys.has(key)) duplicateKey ??= here();
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
      if (/[.eE]/.test(literal)) nonIntegerNumber ??= { path: here(), literal: literal.slice(0, 40) };
      i += literal.length - 1;
    }
  }
  return { tooDeep: false, duplicateKey, nonIntegerNumber };
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
