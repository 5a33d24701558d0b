import { join } from "node:path";
import { trackPid } from "./cleanup.ts";
import type { LoadResult, LoadSpec } from "./load-gen.ts";

const LOAD_GEN = join(import.meta.dir, "load-gen.ts");

// Runs the load generator in a child process and reads its one JSON line.
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const proc = Bun.spawn([process.execPath, LOAD_GEN, JSON.stringify(spec)], { stdout: "pipe", stderr: "pipe" });
  const untrack = trackPid(proc.pid);
  try {
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`load generator exited ${code}: ${err}`);
    return JSON.parse(out.trim().split("\n").at(-1)!) as LoadResult;
  } finally {
    proc.kill("SIGKILL");
    untrack();
  }
}
