// One redraw of a tqdm bar with a known total, in tqdm's default format
// `{desc}: {percentage}%|{bar}| {n}/{total} [{elapsed}<{remaining}, {rate}{postfix}]`.
// Colab-style output has no `|{bar}|`; whatever follows the closing "]" was printed by
// someone else onto the same record and is returned as `trailing`.

export interface TqdmBar {
  description: string;
  n: number;
  total: number;
  remaining_s: number | null;
  seconds_per_it: number | null;
  postfix: Record<string, string>;
  trailing: string;
}

const BAR = /^(?:(.*?):\s*)?\d+%(?:\|[^|]*\|)?\s*(\d+)\/(\d+)\s*\[([^\]]*)\](.*)$/;
const RATE = /^(\d+(?:\.\d+)?)(it\/s|s\/it)$/;
const INTERVAL = /^\d+(?::\d\d){1,2}$/;

export function parseTqdmBar(record: string): TqdmBar | null {
  const match = BAR.exec(record.trim());
  if (match === null) return null;
  const [, description = "", n = "", total = "", status = "", trailing = ""] = match;
  const [times = "", rate = "", ...postfix] = status.split(",").map((part) => part.trim());
  return {
    description: description.trim(),
    n: Number(n),
    total: Number(total),
    remaining_s: parseInterval(times.split("<")[1] ?? ""),
    seconds_per_it: parseRate(rate),
    postfix: parsePostfix(postfix),
    trailing: trailing.trim(),
  };
}

// tqdm prints intervals as MM:SS, or H:MM:SS past an hour, and "?" while unknown.
function parseInterval(text: string): number | null {
  if (!INTERVAL.test(text)) return null;
  return text.split(":").reduce((seconds, part) => seconds * 60 + Number(part), 0);
}

// tqdm flips the unit so the number stays >= 1: `1.75it/s` when fast, `1.50s/it` when slow.
function parseRate(text: string): number | null {
  const match = RATE.exec(text);
  if (match === null) return null;
  const value = Number(match[1]);
  if (match[2] === "s/it") return value;
  return value > 0 ? 1 / value : null;
}

function parsePostfix(parts: string[]): Record<string, string> {
  const postfix: Record<string, string> = {};
  for (const part of parts) {
    const separator = part.indexOf("=");
    if (separator > 0) postfix[part.slice(0, separator)] = part.slice(separator + 1);
  }
  return postfix;
}
