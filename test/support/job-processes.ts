import { readdirSync, readFileSync } from "node:fs";

// Read from /proc as an operator would, not through the worker's own code: the test's view of what lives.

// Live processes (a zombie holds nothing) whose environment carries LORA_WORKER_JOB=<jobId>.
export function processesMarkedWith(jobId: string): number[] {
  const entry = `LORA_WORKER_JOB=${jobId}`;
  return readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number).filter((pid) => {
    if (pid === process.pid || !isLive(pid)) return false;
    try {
      return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(entry);
    } catch {
      return false;
    }
  });
}

// Alive and not a zombie (state Z, after the last ")" of /proc/<pid>/stat).
export function isLive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

// SIGKILL to everything of the job when the test ends, however it ends: nothing a test started outlives it.
export function killJobAtEnd(jobId: () => string | null): Disposable {
  return {
    [Symbol.dispose]() {
      const id = jobId();
      if (id === null) return;
      for (const pid of processesMarkedWith(id)) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {
          // already gone
        }
      }
    },
  };
}
