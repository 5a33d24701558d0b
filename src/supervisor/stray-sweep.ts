import { markedProcessesOf } from "./marked-processes.ts";

const SWEEP_GRACE_MS = 2000;
const SWEEP_POLL_MS = 20;

// SIGTERM, a short grace, then SIGKILL for whatever still carries the job's marker.
export async function sweepStrays(jobId: string): Promise<number> {
  const found = markedProcessesOf(jobId);
  for (const pid of found) signal(pid, "SIGTERM");
  const deadline = performance.now() + SWEEP_GRACE_MS;
  while (markedProcessesOf(jobId).length > 0 && performance.now() < deadline) await Bun.sleep(SWEEP_POLL_MS);
  const stubborn = markedProcessesOf(jobId);
  for (const pid of stubborn) signal(pid, "SIGKILL");
  while (markedProcessesOf(jobId).length > 0 && performance.now() < deadline + SWEEP_GRACE_MS) await Bun.sleep(SWEEP_POLL_MS);
  return found.length;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}
