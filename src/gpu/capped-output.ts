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
