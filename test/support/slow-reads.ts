// Reads of one file by a running process made slow: strace attached to every thread of `pid` delays each pread64
// of `path` (and only of it) by `delayMs`, until disposed. How a test holds a dataset copy in the middle.
export async function slowReads(pid: number, path: string, delayMs: number): Promise<AsyncDisposable> {
  const inject = `inject=pread64:delay_enter=${delayMs * 1000}`;
  const args = ["strace", "-f", "-p", String(pid), "-P", path, "-e", "trace=pread64", "-e", inject, "-o", "/dev/null"];
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
