// Python's number formatting where it differs from JavaScript's, so simulated output matches
// what CPython prints byte for byte.

// `format(x, ".Nf")`: Python rounds exact ties to even, toFixed rounds them away from zero.
export function pyFixed(x: number, digits: number): string {
  if (!Number.isFinite(x)) return pySpecial(x);
  const rounded = x.toFixed(digits);
  const [whole = "", fraction = ""] = x.toFixed(100).split(".");
  if (!/^50*$/.test(fraction.slice(digits))) return rounded;
  const kept = fraction.slice(0, digits);
  const lastDigit = Number((whole + kept).at(-1));
  if (lastDigit % 2 === 1) return rounded;
  return digits === 0 ? whole : `${whole}.${kept}`;
}

// `str(x)` for a float: shortest round-trip digits, scientific outside 1e-4 <= |x| < 1e16.
export function pyFloatStr(x: number): string {
  if (!Number.isFinite(x)) return pySpecial(x);
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  const [mantissa = "", exponent = ""] = x.toExponential().split("e");
  const power = Number(exponent);
  if (power < -4 || power >= 16) return `${mantissa}${pyExponent(power)}`;
  return String(x);
}

// `format(x, ".Ng")`: significant digits, trailing zeros dropped, scientific when the exponent
// is below -4 or at least the precision.
export function pyFormatG(x: number, precision: number): string {
  if (!Number.isFinite(x)) return pySpecial(x);
  if (x === 0) return "0";
  const [mantissa = "", exponent = ""] = x.toExponential(precision - 1).split("e");
  const power = Number(exponent);
  if (power < -4 || power >= precision) return `${stripZeros(mantissa)}${pyExponent(power)}`;
  return stripZeros(x.toFixed(precision - 1 - power));
}

// `repr(s)` for a str: single quotes unless the text holds a single quote and no double quote.
export function pyStrRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escaped = text
    .replaceAll("\\", "\\\\")
    .replaceAll(quote, `\\${quote}`)
    .replaceAll("\n", "\\n")
    .replaceAll("\r", "\\r")
    .replaceAll("\t", "\\t");
  return `${quote}${escaped}${quote}`;
}

function pyExponent(power: number): string {
  return `e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
}

function stripZeros(digits: string): string {
  return digits.includes(".") ? digits.replace(/0+$/, "").replace(/\.$/, "") : digits;
}

function pySpecial(x: number): string {
  if (Number.isNaN(x)) return "nan";
  return x > 0 ? "inf" : "-inf";
}
