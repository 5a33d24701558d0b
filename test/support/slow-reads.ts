// Calls of one syscall on one path by a running process made slow: strace attached to every thread of `pid` delays
// each such call (and only those) by `delayMs`, until disposed. How a test holds a dataset copy (pread64) or a
// resume's links to its predecessor's copy (link) in the middle.
export async function slowCalls(pid: number, syscall: string, path: string, delayMs: number): Promise<AsyncDisposable> {
  const inject = `inject=${syscall}:delay_enter=${delayMs * 1000}`;
  const args = ["strace", "-f", "-p", String(pid), "-P", path, "-e", `trace=${syscall}`, "-e", inject, "-o", "/dev/null"];
  const strace = Bun.spawn(args, { stdout: "ignore", stderr: "pipe" });
  const reader = strace.stderr.getReader();
  for (let seen = ""; !seen.includes("attached"); ) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`strace did not attach: ${seen}`);
    seen += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return {
    async [Symbol.asyncDispose]() {
      strace.kill("SIGINT");
      await strace.exited;
    },
  };
}

/** Each pread64 of `path` by `pid` held `delayMs`. */
export const slowReads = (pid: number, path: string, delayMs: number) => slowCalls(pid, "pread64", path, delayMs);
