/**
 * Runs nvidia-smi under a hard deadline and a cap on what it prints. A wedged driver leaves nvidia-smi in
 * uninterruptible sleep (state D), where even SIGKILL waits on the kernel, so at the deadline or the cap the outcome
 * is decided without waiting for the process to die.
 * nvidia-smi prints its own errors on stdout, so a failure's detail is the first line of stdout, then of stderr.
 */
import type { Subprocess } from "bun";
import { signalGroup } from "../os/terminate.ts";

// Per stream. Real answers are a few KiB even for 16 GPUs with many processes; past this it is not nvidia-smi's CSV.
export const MAX_OUTPUT_BYTES = 1024 * 1024;

export type SmiOutcome = { ok: true; stdout: string } | { ok: false; detail: string };

export interface SmiCall {
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

export async function runNvidiaSmi(call: SmiCall): Promise<SmiOutcome> {
  const child = spawn(call);
  if ("detail" in child) return child;
  let timer: Timer | undefined;
  const expired = new Promise<typeof TIMED_OUT>((resolve) => (timer = setTimeout(resolve, call.timeoutMs, TIMED_OUT)));
  const finished = await Promise.race([collect(child), expired]);
  clearTimeout(timer);
  if (finished === TIMED_OUT) return stop(child, `nvidia-smi timed out after ${call.timeoutMs} ms`);
  if ("overflowed" in finished) {
    return stop(child, `nvidia-smi printed more than ${MAX_OUTPUT_BYTES} bytes on ${finished.overflowed}; its output was not read further`);
  }
  return judge(finished);
}

function spawn(call: SmiCall): Child | { ok: false; detail: string } {
  try {
    // Its own process group, so a stop also kills whatever a wrapper script started (and holds the pipes).
    return Bun.spawn([call.path, ...call.args], { stdin: "ignore", stdout: "pipe", stderr: "pipe", detached: true });
  } catch (error) {
    const code = error instanceof Error && "code" in error ? error.code : undefined;
    if (code === "ENOENT") return { ok: false, detail: `nvidia-smi not found at ${call.path}` };
    return { ok: false, detail: `nvidia-smi could not be started at ${call.path}: ${String(error)}` };
  }
}

async function collect(child: Child): Promise<Finished | Overflowed> {
  const output = await captureOutput({ stdout: child.stdout, stderr: child.stderr }, MAX_OUTPUT_BYTES);
  if ("overflowed" in output) return output;
  await child.exited;
  return { exitCode: child.exitCode, signal: child.signalCode, ...output };
}

function judge(finished: Finished): SmiOutcome {
  if (finished.exitCode === 0) return { ok: true, stdout: finished.stdout };
  const silent = finished.exitCode === null ? `nvidia-smi was killed by ${finished.signal}` : `nvidia-smi exited with code ${finished.exitCode} and printed nothing`;
  return { ok: false, detail: firstLine(finished.stdout) ?? firstLine(finished.stderr) ?? silent };
}

// The detail is decided before the signal is sent: the group may not die at once (state D), and need not.
function stop(child: Child, detail: string): SmiOutcome {
  if (!signalGroup(child.pid, "SIGKILL")) child.kill("SIGKILL");
  return { ok: false, detail };
}

/**
 * A child's stdout and stderr read chunk by chunk, never past a byte cap per stream. nvidia-smi's real answers are a
 * few KiB; one that prints without end (a broken wrapper, a wedged tool) would otherwise grow the worker by GiBs
 * and keep the event loop busy decoding. Past the cap the stream is cancelled and nothing more of it is kept.
 */
export type StreamName = "stdout" | "stderr";

export interface Overflowed {
  overflowed: StreamName;
}

export type CappedOutput = { stdout: string; stderr: string } | Overflowed;

type Capture = { overflowed: false; text: string } | { overflowed: true };

/** Both streams whole, or the first one to pass `maxBytes`, without waiting for the other to end. */
export function captureOutput(streams: Record<StreamName, ReadableStream<Uint8Array>>, maxBytes: number): Promise<CappedOutput> {
  return new Promise((resolve) => {
    const texts: Partial<Record<StreamName, string>> = {};
    for (const name of ["stdout", "stderr"] as const) {
      void captureUpTo(streams[name], maxBytes).then((capture) => {
        if (capture.overflowed) return resolve({ overflowed: name });
        texts[name] = capture.text;
        if (texts.stdout !== undefined && texts.stderr !== undefined) resolve({ stdout: texts.stdout, stderr: texts.stderr });
      });
    }
  });
}

/** Never rejects: the caller may stop waiting for it (a timeout, the other stream's overflow). */
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

/** The first line with something on it, trimmed and truncated, or undefined when there is none. */
export function firstLine(text: string): string | undefined {
  const line = text.split(/\r?\n/).find((candidate) => candidate.trim() !== "");
  return line === undefined ? undefined : truncateLine(line.trim());
}

export function truncateLine(line: string): string {
  return line.length <= MAX_LINE_CHARS ? line : `${line.slice(0, MAX_LINE_CHARS)}…`;
}
