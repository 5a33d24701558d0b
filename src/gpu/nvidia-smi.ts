// nvidia-smi, run and read. It runs under a hard deadline and a cap on what it prints: a wedged driver leaves
// nvidia-smi in uninterruptible sleep (state D), where even SIGKILL waits on the kernel, so at the deadline or
// the cap the outcome is decided without waiting for the process to die. nvidia-smi prints its own errors on
// stdout, so a failure's detail is the first line of stdout, then of stderr.
import type { Subprocess } from "bun";
import { signalGroup } from "../os/terminate.ts";
import { fail, ok, type Result } from "../result.ts";

// A GPU as the probe reports it, read from nvidia-smi's CSV.
export interface GpuProcess {
  pid: number;
  name: string;
  used_mib: number | null;
}

export interface GpuDevice {
  index: number;
  name: string;
  uuid: string;
  memory_total_mib: number | null;
  memory_used_mib: number | null;
  memory_free_mib: number | null;
  utilization_pct: number | null;
  processes: GpuProcess[];
}

// Per stream. Real answers are a few KiB even for 16 GPUs with many processes; past this it is not nvidia-smi's CSV.
export const MAX_OUTPUT_BYTES = 1024 * 1024;

interface SmiCall {
  path: string;
  args: readonly string[];
  timeoutMs: number;
}

interface Finished {
  exitCode: number | null;
  signal: Child["signalCode"];
  stdout: string;
  stderr: string;
}

type Child = Subprocess<"ignore", "pipe", "pipe">;

const TIMED_OUT = Symbol("timed out");

// Its stdout, or why there is none.
export async function runNvidiaSmi(call: SmiCall): Promise<Result<string>> {
  const child = spawn(call);
  if (!child.ok) return child;
  let timer: Timer | undefined;
  const expired = new Promise<typeof TIMED_OUT>((resolve) => (timer = setTimeout(resolve, call.timeoutMs, TIMED_OUT)));
  const finished = await Promise.race([collect(child.value), expired]);
  clearTimeout(timer);
  if (finished === TIMED_OUT) return stop(child.value, `nvidia-smi timed out after ${call.timeoutMs} ms`);
  if ("overflowed" in finished) {
    const detail =
      `nvidia-smi printed more than ${MAX_OUTPUT_BYTES} bytes on ${finished.overflowed}; ` +
      "its output was not read further";
    return stop(child.value, detail);
  }
  return judge(finished);
}

function spawn(call: SmiCall): Result<Child> {
  try {
    // Its own process group, so a stop also kills whatever a wrapper script started (and holds the pipes).
    const options = { stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true } as const;
    return ok(Bun.spawn([call.path, ...call.args], options));
  } catch (error) {
    const code = error instanceof Error && "code" in error ? error.code : undefined;
    if (code === "ENOENT") return fail(`nvidia-smi not found at ${call.path}`);
    return fail(`nvidia-smi could not be started at ${call.path}: ${String(error)}`);
  }
}

async function collect(child: Child): Promise<Finished | Overflowed> {
  const output = await captureOutput({ stdout: child.stdout, stderr: child.stderr }, MAX_OUTPUT_BYTES);
  if ("overflowed" in output) return output;
  await child.exited;
  return { exitCode: child.exitCode, signal: child.signalCode, ...output };
}

function judge(finished: Finished): Result<string> {
  if (finished.exitCode === 0) return ok(finished.stdout);
  const silent =
    finished.exitCode === null
      ? `nvidia-smi was killed by ${finished.signal}`
      : `nvidia-smi exited with code ${finished.exitCode} and printed nothing`;
  return fail(firstLine(finished.stdout) ?? firstLine(finished.stderr) ?? silent);
}

// The detail is decided before the signal is sent: the group may not die at once (state D), and need not.
function stop(child: Child, detail: string): Result<string> {
  if (!signalGroup(child.pid, "SIGKILL")) child.kill("SIGKILL");
  return fail(detail);
}

// A child's stdout and stderr read chunk by chunk, never past a byte cap per stream. nvidia-smi's real answers
// are a few KiB; one that prints without end (a broken wrapper, a wedged tool) would otherwise grow the worker by
// GiBs and keep the event loop busy decoding. Past the cap the stream is cancelled and nothing more of it is kept.
type StreamName = "stdout" | "stderr";

interface Overflowed {
  overflowed: StreamName;
}

type CappedOutput = { stdout: string; stderr: string } | Overflowed;

type Capture = { overflowed: false; text: string } | { overflowed: true };

// Both streams whole, or the first one to pass `maxBytes`, without waiting for the other to end.
function captureOutput(
  streams: Record<StreamName, ReadableStream<Uint8Array>>,
  maxBytes: number,
): Promise<CappedOutput> {
  return new Promise((resolve) => {
    const texts: Partial<Record<StreamName, string>> = {};
    for (const name of ["stdout", "stderr"] as const) {
      void captureUpTo(streams[name], maxBytes).then((capture) => {
        if (capture.overflowed) return resolve({ overflowed: name });
        texts[name] = capture.text;
        const { stdout, stderr } = texts;
        if (stdout !== undefined && stderr !== undefined) resolve({ stdout, stderr });
      });
    }
  });
}

// Never rejects: the caller may stop waiting for it (a timeout, the other stream's overflow).
async function captureUpTo(stream: ReadableStream<Uint8Array>, maxBytes: number): Promise<Capture> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      size += read.value.byteLength;
      if (size > maxBytes) {
        reader.cancel().catch(() => {});
        return { overflowed: true };
      }
      chunks.push(read.value);
    }
  } catch {
    // A pipe that breaks ends the output; the exit status still judges the run.
  }
  return { overflowed: false, text: Buffer.concat(chunks).toString("utf8") };
}

// Enough for nvidia-smi's longest one-line errors (~150 chars) while keeping garbage out of logs and responses.
const MAX_LINE_CHARS = 240;

// The first line with something on it, trimmed and truncated, or undefined when there is none.
export function firstLine(text: string): string | undefined {
  const line = text.split(/\r?\n/).find((candidate) => candidate.trim() !== "");
  return line === undefined ? undefined : truncateLine(line.trim());
}

export function truncateLine(line: string): string {
  return line.length <= MAX_LINE_CHARS ? line : `${line.slice(0, MAX_LINE_CHARS)}…`;
}

// nvidia-smi's CSV: values joined by ", ", never quoted, one row per line. A comma inside a value cannot be told
// from a separator, so one free-text field per query is recoverable: every other field is taken from the two
// ends of the line and whatever is left in between is that field.
export type CsvRecord = Readonly<Record<string, string>>;

export interface CsvLayout {
  fields: readonly string[];
  /** The one field that may contain commas. */
  freeField?: string;
}

// A line as a record keyed by field name, or undefined when its value count does not fit the layout.
export function splitCsvLine(line: string, layout: CsvLayout): CsvRecord | undefined {
  const parts = line.split(",");
  const extra = parts.length - layout.fields.length;
  const freeAt = layout.freeField === undefined ? -1 : layout.fields.indexOf(layout.freeField);
  if (extra < 0 || (extra > 0 && freeAt < 0)) return undefined;
  const freeEnd = freeAt + extra + 1;
  const values =
    extra === 0 ? parts : [...parts.slice(0, freeAt), parts.slice(freeAt, freeEnd).join(","), ...parts.slice(freeEnd)];
  return Object.fromEntries(layout.fields.map((field, i) => [field, (values[i] ?? "").trim()]));
}

// Every line through `toRow`; stops at the first line that does not split or that `toRow` rejects, which is the
// error.
export function parseCsvRows<T>(
  lines: readonly string[],
  layout: CsvLayout,
  toRow: (record: CsvRecord) => T | undefined,
): Result<T[]> {
  const rows: T[] = [];
  for (const line of lines) {
    const record = splitCsvLine(line, layout);
    const row = record === undefined ? undefined : toRow(record);
    if (row === undefined) return fail(line);
    rows.push(row);
  }
  return ok(rows);
}

// Rows of `--format=csv,noheader`, whose values come in the order of the query's fields.
export function parseHeaderless<T>(
  text: string,
  layout: CsvLayout,
  toRow: (record: CsvRecord) => T | undefined,
): Result<T[]> {
  return parseCsvRows(nonEmptyLines(text), layout, toRow);
}

export function nonEmptyLines(text: string): string[] {
  return text.split(/\r?\n/).filter((line) => line.trim() !== "");
}

// nvidia-smi writes a value it cannot read as a bracketed reason ("[N/A]", "[Not Supported]") or a bare "N/A".
const UNKNOWN = /^(\[.*\]|N\/A)$/;
// Tolerates the unit nvidia-smi appends when `nounits` is left out of --format.
const NUMBER_WITH_OPTIONAL_UNIT = /^(\d+(?:\.\d+)?)\s*(?:MiB|%)?$/;

// A MiB or % value: a number, null when nvidia-smi says it is unknown, undefined when it is not a quantity at all.
export function parseQuantity(raw: string): number | null | undefined {
  if (UNKNOWN.test(raw)) return null;
  const match = NUMBER_WITH_OPTIONAL_UNIT.exec(raw);
  return match ? Number(match[1]) : undefined;
}

// A whole number such as an index or a pid, or undefined.
function parseWholeNumber(raw: string | undefined): number | undefined {
  return raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : undefined;
}

// GPU names carry no commas in practice, but `name` is the one free field so a future one would still parse.
export const DEVICE_QUERY: CsvLayout = {
  fields: ["index", "pci.bus_id", "uuid", "name", "memory.total", "memory.used", "memory.free", "utilization.gpu"],
  freeField: "name",
};

export interface DeviceRow extends Omit<GpuDevice, "processes"> {
  bus_id: string;
}

type DeviceNumbers = Pick<GpuDevice, "memory_total_mib" | "memory_used_mib" | "memory_free_mib" | "utilization_pct">;

// The memory and utilization figures of a row of any query-gpu field list; a field not queried reads as unknown.
export function readDeviceNumbers(record: CsvRecord): DeviceNumbers | undefined {
  const numbers = {
    memory_total_mib: quantityOf(record, "memory.total"),
    memory_used_mib: quantityOf(record, "memory.used"),
    memory_free_mib: quantityOf(record, "memory.free"),
    utilization_pct: quantityOf(record, "utilization.gpu"),
  };
  return allParsed(numbers) ? numbers : undefined;
}

// A row of DEVICE_QUERY, or undefined when a required value is missing or malformed.
export function toDeviceRow(record: CsvRecord): DeviceRow | undefined {
  const index = parseWholeNumber(record["index"]);
  const numbers = readDeviceNumbers(record);
  const { uuid, name } = record;
  const bus_id = record["pci.bus_id"];
  if (index === undefined || numbers === undefined || !uuid || !name || !bus_id) return undefined;
  return { index, name, uuid, bus_id, ...numbers };
}

function quantityOf(record: CsvRecord, field: string): number | null | undefined {
  const raw = record[field];
  return raw === undefined ? null : parseQuantity(raw);
}

function allParsed<T extends object>(values: T): values is { [K in keyof T]: Exclude<T[K], undefined> } {
  return !Object.values(values).includes(undefined);
}

// Process names are paths or command lines and may hold commas, so `process_name` is the free field.
export const PROCESS_QUERY: CsvLayout = {
  fields: ["gpu_uuid", "pid", "process_name", "used_gpu_memory"],
  freeField: "process_name",
};

export interface ProcessRow extends GpuProcess {
  gpu_uuid: string;
}

// A compute-apps row of any field order that has these four fields, or undefined when one is malformed.
export function toProcessRow(record: CsvRecord): ProcessRow | undefined {
  const pid = parseWholeNumber(record["pid"]);
  const rawUsed = record["used_gpu_memory"];
  const used_mib = rawUsed === undefined ? undefined : parseQuantity(rawUsed);
  const gpu_uuid = record["gpu_uuid"];
  const name = record["process_name"];
  if (pid === undefined || used_mib === undefined || !gpu_uuid || name === undefined) return undefined;
  return { gpu_uuid, pid, name, used_mib };
}

// Rows of PROCESS_QUERY in `--format=csv,noheader`, a row spread over lines by a name's newlines rejoined.
export function parseProcessRows(text: string): Result<ProcessRow[]> {
  return parseCsvRows(rejoinRows(nonEmptyLines(text), isWholeRow), PROCESS_QUERY, toProcessRow);
}

function isWholeRow(line: string): boolean {
  const record = splitCsvLine(line, PROCESS_QUERY);
  return record !== undefined && toProcessRow(record) !== undefined;
}

// nvidia-smi prints a process name as the process set it, newlines included (any local user can name a process
// so), which spreads one compute-apps row over several lines. A row starts with the GPU's UUID and the pid; a
// line that does not, or that comes while the row before still lacks its memory field, continues the row before.
// The newline stays in the name as the two characters `\n`: visible to an operator, yet one line in tables, logs
// and refusal details, where a raw newline would forge a line. A name's own text cannot be told from a row that
// starts with a real UUID and pid after a complete-looking line, so such a name can still add a row; it cannot
// make the probe fail.
const NAME_NEWLINE = "\\n";

// `GPU-<hex and dashes>`; MIG instances appear as `MIG-…` on drivers that list them apart.
const ROW_START = /^(?:GPU|MIG)-[\w/-]+, \d+, /;

// The output's lines regrouped into one line per row, continuations joined with NAME_NEWLINE.
function rejoinRows(lines: readonly string[], isWholeRow: (line: string) => boolean): string[] {
  const rows: string[] = [];
  for (const line of lines) {
    const last = rows.at(-1);
    if (last === undefined || (ROW_START.test(line) && isWholeRow(last))) rows.push(line);
    else rows[rows.length - 1] = `${last}${NAME_NEWLINE}${line}`;
  }
  return rows;
}
