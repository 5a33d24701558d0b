import { readdirSync, readFileSync } from "node:fs";

// /proc/<pid>/stat counts utime and stime (fields 14 and 15) in clock ticks, for every thread of the process.
export const CLOCK_TICKS = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

export function cpuSeconds(pid: number): number {
  const text = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

export function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) * 1024 : Number.NaN;
}

/** CPU seconds a process spends over a window, as a fraction of one core. */
export function cpuMeter(pid: number) {
  const wall0 = performance.now();
  const cpu0 = cpuSeconds(pid);
  return () => {
    const wallS = (performance.now() - wall0) / 1000;
    const cpuS = cpuSeconds(pid) - cpu0;
    return { wallS, cpuS, share: cpuS / wallS };
  };
}

/** Pids whose command line names `text` (a benchmark's scratch dir): the shims and trainers a worker left detached. */
export function pidsMentioning(text: string): number[] {
  return readdirSync("/proc").flatMap((name) => {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) return [];
    try {
      return readFileSync(`/proc/${name}/cmdline`, "utf8").includes(text) ? [Number(name)] : [];
    } catch {
      return [];
    }
  });
}

export function killGroupAndLeader(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGKILL");
    } catch {
      // already gone, or not a group leader
    }
  }
}

export async function killAllMentioning(text: string): Promise<void> {
  for (let round = 0; round < 50; round++) {
    const pids = pidsMentioning(text);
    if (pids.length === 0) return;
    pids.forEach(killGroupAndLeader);
    await Bun.sleep(20);
  }
}
