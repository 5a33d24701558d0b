// The Slurm commands the worker runs, and what it reads from them (Slurm 22.05: `scontrol` has no --json, plain
// `sacct` needs an accounting database, so a job's state is read from `scontrol show job -o`, kept MinJobAge
// seconds after its end).
import { join } from "node:path";
import { fail, ok, type Result } from "../../../result.ts";
import type { ClusterNode } from "../../placement.ts";

interface SlurmSettings {
  // Where sbatch, scancel and scontrol are.
  bin_dir: string;
  partition: string;
  account: string;
  mem: string;
}

/** A job as `scontrol show job -o` shows it, or null once Slurm has forgotten it. */
export interface JobState {
  /** JobState: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ... */
  state: string;
  /** Reason: why a pending job waits (Resources, Priority, ...), or None. */
  reason: string;
  /** ExitCode: "<exit code>:<signal>" of the batch script. */
  exitCode: string;
}

// States in which the job's processes may still run (or are about to).
const LIVE_STATES = new Set([
  "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT",
]);
// A command that does not answer within this is treated as failed (and retried by the caller's next look).
const COMMAND_TIMEOUT_MS = 15_000;

export const isLive = (job: JobState) => LIVE_STATES.has(job.state);


// `slurmConf`: where the commands find their cluster (the worker's SLURM_CONF), when not at their built-in path.
export function createSlurmClient(settings: SlurmSettings, slurmConf: string | undefined) {
  // What a command printed, or its last words on stderr.
  const env = { PATH: "/usr/bin:/bin", ...(slurmConf === undefined ? {} : { SLURM_CONF: slurmConf }) };
  const run = async (command: string, args: string[]): Promise<Result<string>> => {
    let proc;
    try {
      proc = Bun.spawn([join(settings.bin_dir, command), ...args], { stdout: "pipe", stderr: "pipe", env });
    } catch (err) {
      return fail(cannotRun(command, err));
    }
    const timer = setTimeout(() => proc.kill("SIGKILL"), COMMAND_TIMEOUT_MS);
    const [stdout, stderr, code] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.exited,
    ]);
    clearTimeout(timer);
    if (code === 0) return ok(stdout);
    return fail(stderr.trim().split("\n").slice(-3).join(" ") || `${command} exited ${code}`);
  };
  return {
    /**
     * Asked at start-up, before anything waits on it: why Slurm does not answer a question about the job of this
     * name (`runnable`: false when its commands cannot even be run here), or null when it does.
     */
    unanswered(name: string): { error: string; runnable: boolean } | null {
      const args = ["--noheader", `--name=${name}`, "--format=%i"];
      try {
        const res = Bun.spawnSync([join(settings.bin_dir, "squeue"), ...args], { env, timeout: COMMAND_TIMEOUT_MS });
        if (res.exitCode === 0) return null;
        const said = res.stderr.toString().trim().split("\n").slice(-3).join(" ");
        const error = res.exitedDueToTimeout ? `squeue did not answer within ${COMMAND_TIMEOUT_MS / 1000} s` : said;
        return { error: error || `squeue exited ${res.exitCode}`, runnable: true };
      } catch (err) {
        return { error: cannotRun("squeue", err), runnable: false };
      }
    },
    /** Submits a batch script; the job id, or Slurm's refusal. */
    async submit(script: string, options: string[]): Promise<Result<string>> {
      const res = await run("sbatch", ["--parsable", ...placementOf(settings), ...options, script]);
      if (!res.ok) return res;
      // --parsable prints "<id>" or "<id>;<cluster>".
      const jobId = res.value.trim().split(";")[0] ?? "";
      return /^\d+$/.test(jobId) ? ok(jobId) : fail(`sbatch printed no job id: ${res.value.trim()}`);
    },
    /** Whether Slurm would take such a job (a partition, account and gres it knows), without submitting it. */
    async wouldTake(options: string[]): Promise<Result<string>> {
      return run("sbatch", ["--test-only", ...placementOf(settings), ...options, "--wrap=true"]);
    },
    // The job's state; null once Slurm has forgotten it.
    async state(jobId: string): Promise<Result<JobState | null>> {
      const res = await run("scontrol", ["show", "job", "-o", jobId]);
      if (!res.ok) return /Invalid job id/i.test(res.error) ? ok(null) : res;
      const fields = parseFields(res.value);
      const state = (fields.JobState ?? "UNKNOWN").split("+")[0]!;
      return ok({ state, reason: fields.Reason ?? "None", exitCode: fields.ExitCode ?? "" });
    },
    /** A signal to every process of the job (--full: the batch script and all it started), or cancels a pending job. */
    async signal(jobId: string, signal: "TERM" | "KILL" | null): Promise<Result<string>> {
      return run("scancel", signal === null ? [jobId] : ["--full", `--signal=${signal}`, jobId]);
    },
    /** The job Slurm knows by this name, or null: how a job submitted just before a crash is found again. */
    async byName(name: string): Promise<Result<string | null>> {
      const res = await run("squeue", ["--noheader", `--name=${name}`, "--format=%i"]);
      if (!res.ok) return res;
      return ok(res.value.trim().split("\n").find((line) => /^\d+$/.test(line.trim()))?.trim() ?? null);
    },
    /** The cluster's nodes with their GPUs by type (--details adds GresUsed), or why scontrol could not say. */
    async nodes(): Promise<Result<SlurmNode[]>> {
      const res = await run("scontrol", ["--details", "show", "node", "-o"]);
      if (!res.ok) return res;
      const lines = res.value.split("\n").filter((line) => line.trim() !== "");
      return ok(lines.map(parseFields).map(nodeOf));
    },
  };
}

export type SlurmClient = ReturnType<typeof createSlurmClient>;

// A command missing from slurm.bin_dir (or not executable) is said as such, not thrown at whoever asked.
const cannotRun = (command: string, err: unknown) =>
  `${command} in slurm.bin_dir cannot be run (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;

/** A node as scontrol shows it: the seam's cluster node, its gres in Slurm's own words. */
export type SlurmNode = ClusterNode;

function nodeOf(fields: Record<string, string>): SlurmNode {
  const gres = fields.Gres ?? "";
  const used = fields.GresUsed ?? "";
  const allocated = gpuCounts(used);
  const gpus = [...gpuCounts(gres)].map(([type, total]) => ({
    type: type === "" ? null : type, total, allocated: allocated.get(type) ?? 0,
  }));
  return { name: fields.NodeName ?? "", state: fields.State ?? "", gpus, gres, gres_used: used };
}

// "gpu:a6000:2(S:0)" or "gpu:a6000:1(IDX:0)" (a type is optional, entries comma-separated outside parentheses):
// GPUs by type, "" for untyped.
function gpuCounts(text: string): Map<string, number> {
  const byType = new Map<string, number>();
  for (const entry of text.split(/,(?![^(]*\))/)) {
    const match = /^gpu(?::([^:(]+))?:(\d+)/.exec(entry.trim());
    if (match) byType.set(match[1] ?? "", (byType.get(match[1] ?? "") ?? 0) + Number(match[2]));
  }
  return byType;
}

function placementOf(settings: SlurmSettings): string[] {
  return [
    ...(settings.partition === "" ? [] : [`--partition=${settings.partition}`]),
    ...(settings.account === "" ? [] : [`--account=${settings.account}`]),
    ...(settings.mem === "" ? [] : [`--mem=${settings.mem}`]),
  ];
}

// `Key=Value Key=Value ...` as scontrol -o prints it; a value runs to the next ` Key=`.
function parseFields(line: string): Record<string, string> {
  const fields: Record<string, string> = {};
  const field = /(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(.*?)(?=\s[A-Za-z][A-Za-z0-9_:/]*=|$)/g;
  for (const match of line.trim().matchAll(field)) {
    fields[match[1]!] = match[2]!;
  }
  return fields;
}
