import { join } from "node:path";
import { trackPid } from "./cleanup.ts";

export const BARE_SERVER = join(import.meta.dir, "bare-server.ts");

export interface Listening extends AsyncDisposable {
  proc: ReturnType<typeof Bun.spawn>;
  url: string;
  /** ms from just before the exec to the "listening" line. */
  listenedMs: number;
}

const LISTENING = /"msg":"listening","url":"([^"]+)"/;

// Starts a server that logs `{"msg":"listening","url":…}` (the worker, or the bare baseline) and waits for that line.
export async function spawnListening(command: string[], env: Record<string, string> = {}): Promise<Listening> {
  const t0 = performance.now();
  const proc = Bun.spawn(command, { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env }, stdout: "pipe", stderr: "inherit" });
  const untrack = trackPid(proc.pid);
  const dispose = async () => {
    proc.kill("SIGKILL");
    await proc.exited;
    untrack();
  };
  try {
    const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let out = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`${command[0]} exited before listening: ${out}`);
      out += decoder.decode(value, { stream: true });
      const url = LISTENING.exec(out)?.[1];
      if (url) {
        const listenedMs = performance.now() - t0;
        void drain(reader);
        return { proc, url, listenedMs, [Symbol.asyncDispose]: dispose };
      }
    }
  } catch (err) {
    await dispose();
    throw err;
  }
}

// Keeps reading so a chatty server never blocks on a full pipe.
async function drain(reader: { read(): Promise<{ done: boolean }> }): Promise<void> {
  try {
    while (!(await reader.read()).done);
  } catch {
    // the process is gone
  }
}
