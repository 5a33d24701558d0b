// What Python prints where the worker or a test reads it: str() of a float in LoRA metadata, repr()
// of a str in error messages and of a JSON document in a log line, and tracebacks cut to their header
// and last line, which is all the worker classifies a failure by.

// Where the training venv lives on the deployment host (SPEC §1); only named in error output.
export const PYTHON = "/opt/fluxgym/.venv/bin/python";

export const CUDA_OOM =
  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of " +
  "23.56 GiB of which 11.69 MiB is free. Including non-PyTorch memory, this process has 23.53 GiB memory in " +
  "use. Of the allocated memory 22.71 GiB is allocated by PyTorch, and 411.95 MiB is reserved by PyTorch but " +
  "unallocated. If reserved but unallocated memory is large try setting " +
  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory " +
  "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";

// What sd-scripts hits first when a path flag it needs was never given.
export const PATH_NOT_GIVEN = "TypeError: stat: path should be string, bytes, os.PathLike or integer, not NoneType";

export function traceback(exception: string): string {
  return `Traceback (most recent call last):\n${exception}\n`;
}

// accelerate's simple_launcher when the trainer exits non-zero; accelerate itself then exits 1.
export function calledProcessError(command: string[], exitCode: number): string {
  const cmd = `[${command.map(pyStrRepr).join(", ")}]`;
  return traceback(`subprocess.CalledProcessError: Command '${cmd}' returned non-zero exit status ${exitCode}.`);
}

export function cantOpenFile(script: string): string {
  return `${PYTHON}: can't open file ${pyStrRepr(script)}: [Errno 2] No such file or directory\n`;
}

// `str(x)` for a float: shortest round-trip digits, scientific outside 1e-4 <= |x| < 1e16.
export function pyFloatStr(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  const [mantissa = "", exponent = ""] = x.toExponential().split("e");
  const power = Number(exponent);
  if (power >= -4 && power < 16) return String(x);
  return `${mantissa}e${power < 0 ? "-" : "+"}${String(Math.abs(power)).padStart(2, "0")}`;
}

// `repr(s)` for a str: single quotes unless the text holds a single quote and no double quote.
export function pyStrRepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escapes: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
  escapes[quote] = `\\${quote}`;
  return quote + text.replace(/[\\'"\n\r\t]/g, (char) => escapes[char] ?? char) + quote;
}

// `repr()` of what json.load returns (a JSON 4.0 reads back here as the int 4).
export function pyRepr(value: unknown): string {
  if (value === null) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : pyFloatStr(value);
  if (typeof value === "string") return pyStrRepr(value);
  if (Array.isArray(value)) return `[${value.map(pyRepr).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  return `{${entries.map(([key, item]) => `${pyStrRepr(key)}: ${pyRepr(item)}`).join(", ")}}`;
}
