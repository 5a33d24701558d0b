// nvidia-smi writes a value it cannot read as a bracketed reason ("[N/A]", "[Not Supported]") or a bare "N/A".
const UNKNOWN = /^(\[.*\]|N\/A)$/;
// Tolerates the unit nvidia-smi appends when `nounits` is left out of --format.
const NUMBER_WITH_OPTIONAL_UNIT = /^(\d+(?:\.\d+)?)\s*(?:MiB|%)?$/;

/** A MiB or % value: a number, null when nvidia-smi says it is unknown, undefined when it is not a quantity at all. */
export function parseQuantity(raw: string): number | null | undefined {
  if (UNKNOWN.test(raw)) return null;
  const match = NUMBER_WITH_OPTIONAL_UNIT.exec(raw);
  return match ? Number(match[1]) : undefined;
}

/** A whole number such as an index or a pid, or undefined. */
export function parseWholeNumber(raw: string | undefined): number | undefined {
  return raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : undefined;
}
