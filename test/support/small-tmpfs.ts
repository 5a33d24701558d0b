import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isLive, processesMarkedWith } from "./job-processes.ts";
import { waitFor } from "./wait.ts";

// A real filesystem that fills up: a tmpfs of a few MiB mounted over a test's state dir.

/** Why no tmpfs can be mounted here (not root, no CAP_SYS_ADMIN in this container), or null when one can. */
export function tmpfsUnavailable(): string | null {
  if (process.getuid?.() !== 0) return `mounting a tmpfs needs root; these tests run as uid ${process.getuid?.()}`;
  const probe = mkdtempSync(join(tmpdir(), "lora-worker-tmpfs-probe-"));
  try {
    const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], { stdout: "ignore", stderr: "pipe" });
    if (mounted.exitCode !== 0) return `mount -t tmpfs failed: ${mounted.stderr.toString().trim() || `exit ${mounted.exitCode}`}`;
    Bun.spawnSync(["umount", probe]);
    return null;
  } catch (err) {
    return `mount could not be run: ${(err as Error).message}`;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/**
 * Mounts a tmpfs of `bytes` over `dir` (a worker's state dir). Unmounted on dispose, however the test ends:
 * first every process still marked with a job of that state dir is killed, as they hold files open in it.
 */
export async function mountTmpfs(dir: string, bytes: number): Promise<AsyncDisposable> {
  const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir], { stdout: "ignore", stderr: "pipe" });
  if (mounted.exitCode !== 0) throw new Error(`mount -t tmpfs over ${dir} exited ${mounted.exitCode}: ${mounted.stderr}`);
  return {
    async [Symbol.asyncDispose]() {
      const jobs = join(dir, "jobs");
      const ids = existsSync(jobs) ? readdirSync(jobs) : [];
      const left = () => ids.flatMap(processesMarkedWith);
      for (const pid of left()) killQuietly(pid);
      await waitFor(() => left().every((pid) => !isLive(pid)), `the jobs' processes in ${dir} to be gone`, 10_000).catch(() => undefined);
      if (Bun.spawnSync(["umount", dir], { stdout: "ignore", stderr: "pipe" }).exitCode === 0) return;
      console.warn(`umount ${dir} failed (still busy); detaching it lazily`);
      Bun.spawnSync(["umount", "-l", dir]);
    },
  };
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

const CHUNK = Buffer.alloc(1024 * 1024);

export interface Filler extends Disposable {
  path: string;
  /** Writes on until the filesystem refuses again (something else may have freed space); returns the bytes added. */
  topUp(): number;
  /** Deletes the filler: the space is free again. */
  remove(): void;
}

/** A file that takes every free byte of the filesystem holding `dir`: written until ENOSPC. */
export function fillUntilFull(dir: string): Filler {
  const path = join(dir, "filler");
  const topUp = () => {
    const fd = openSync(path, "a");
    let written = 0;
    try {
      // A short write means the last free page was taken; the next write is the one that says ENOSPC.
      for (;;) written += writeSync(fd, CHUNK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
    } finally {
      closeSync(fd);
    }
    return written;
  };
  topUp();
  const remove = () => rmSync(path, { force: true });
  return { path, topUp, remove, [Symbol.dispose]: remove };
}
