// A run as a Slurm batch job: the batch script is this program's shim in the job directory (on storage the nodes
// share), so launch.json, trainer.json, exit.json and train.log work as on this host. Slurm is the truth about
// whether the run's processes live: it places them (--gres), bounds them (--time), signals and kills every one of
// them (proctrack/cgroup catches a setsid escapee too) and keeps them across its own restarts.
import { readFileSync } from "node:fs";
import { JOB_MARKER_ENV } from "../../../os/proc.ts";
import type { Config } from "../../../config/schema.ts";
import { createSlurmClient, isLive, type JobState, type SlurmClient } from "./slurm-client.ts";
import type { JobRequest } from "../../../request/schema.ts";
import { fail } from "../../../result.ts";
import { TIERS } from "../../../tiers.ts";
import type { ExitWatch } from "../../exit-watch.ts";
import type {
  Backend, BackendEnvironment, Placement, PlacementRequest, ShimCommand, Started,
} from "../../placement.ts";
import { slurmChecks } from "./slurm-checks.ts";

interface SlurmPlan {
  slurm: SlurmClient;
  // What the run asks of Slurm: the device's gres and the tier's time limit.
  gres: string;
  timeMinutes: number;
  pollMs: number;
}

// What slurmd sets for a job's --gres GPUs.
const SLURM_GPU_ENV = ["CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS", "GPU_DEVICE_ORDINAL", "SLURM_JOB_ID"];

// While a stop waits for Slurm to report the end, it asks this often.
const STOP_POLL_MS = 200;
// SIGKILL through Slurm ends a job within seconds; one still live after this is asked again (untilDone retries).
const KILL_WAIT_MS = 60_000;
// The batch script that runs the shim, and its output, in the job directory.
const SLURM_SCRIPT = "slurm.sh";
const SLURM_OUT = "slurm.out";

const slurmJobName = (id: string) => `lora-worker-${id}`;

// What the run asks of Slurm; nothing of the worker's environment; a node failure ends the run (NODE_FAIL) instead
// of starting it over.
const resourceOptions = (plan: SlurmPlan) =>
  [`--gres=${plan.gres}`, `--time=${plan.timeMinutes}`, "--export=NONE", "--no-requeue"];

// Up to slurm.max_active_jobs runs, each waiting in Slurm's queue for a GPU Slurm chooses and names in the job's
// environment, bounded by the tier as its --time (whole minutes, rounded up).
export function slurmBackend(config: Config, shim: ShimCommand, environment: BackendEnvironment): Backend {
  const slurm = createSlurmClient(config.slurm, environment.SLURM_CONF);
  const planFor = (request: JobRequest): SlurmPlan => ({
    slurm,
    gres: config.devices.find((d) => d.index === request.device_index)?.gres ?? "gpu:1",
    timeMinutes: Math.ceil(config.watchdog.tier_timeout_seconds[TIERS[request.tier].budget] / 60),
    pollMs: config.slurm.poll_seconds * 1000,
  });
  return {
    kind: "slurm",
    maxActive: config.slurm.max_active_jobs,
    maxActiveKey: "slurm.max_active_jobs",
    gpuAdmission: false,
    facts: { backend: "slurm", max_active_jobs: config.slurm.max_active_jobs },
    launch: () => ({ env: {}, inheritEnv: SLURM_GPU_ENV, forwardSignals: true }),
    // An unknown partition, account or gres.
    async refusal(request) {
      const answer = await slurm.wouldTake(resourceOptions(planFor(request)));
      if (answer.ok) return null;
      return `Slurm would not take the run: ${answer.error}; check the [slurm] settings and the devices' gres ` +
        "(lora-worker doctor)";
    },
    // Slurm counts the --time from the run's start, not from its time in the queue.
    deadline: () => Number.POSITIVE_INFINITY,
    start: (request) => startSlurmRun(request, shim.command, planFor(request.train)),
    // Slurm holds a batch job's processes on whatever node, across its own restarts and ours: it says how it ends.
    // A job recorded without its Slurm id (the worker stopped between sbatch and the record) is found by its name.
    // Asked once, first, whether Slurm answers here at all: a worker configured for this host, or one whose Slurm
    // commands cannot run, would otherwise follow the run by asking forever, the job active and nothing watching it.
    // A configured Slurm that fails to answer is asked again (its runs outlive its own restarts).
    recover: ({ id, train, recorded, state }, request) => {
      const silent = slurm.unanswered(slurmJobName(id));
      if (silent !== null && (config.trainer.backend !== "slurm" || !silent.runnable)) {
        const backend = config.trainer.backend;
        const context = backend === "slurm" ? "" : `, and this worker's trainer.backend is "${backend}"`;
        const check = backend === "slurm" ? "check slurm.bin_dir (lora-worker doctor); " : "";
        const why = `its placement.json says Slurm placed its run, but Slurm does not answer here (${silent.error})` +
          `${context}: nothing could follow the run, so the restart ended it; ${check}if a cluster still runs it, ` +
          `scancel the Slurm job named ${slurmJobName(id)}`;
        return { gone: "worker_restarted", why };
      }
      const handed = slurmJobIdOf(state);
      const placement = slurmPlacement(request, recorded.schedulerId, planFor(train), handed);
      return { placement, detail: { slurm_job_id: recorded.schedulerId ?? handed } };
    },
    checks: () => slurmChecks(config, slurm),
    async nodes() {
      const listed = await slurm.nodes();
      return listed.ok ? listed : fail(`scontrol show node: ${listed.error}`);
    },
  };
}

// What the worker records of a placed run besides the job's record: its Slurm job.
const slurmJobIdOf = (state: unknown): string | null =>
  typeof state === "object" && state !== null && "slurm_job_id" in state && typeof state.slurm_job_id === "string"
    ? state.slurm_job_id
    : null;

async function startSlurmRun(ctx: PlacementRequest, shimCommand: string[], plan: SlurmPlan): Promise<Started> {
  ctx.jobDir.writeBackendScript(SLURM_SCRIPT, batchScript(ctx, shimCommand));
  const submitted = await plan.slurm.submit(ctx.jobDir.backendFile(SLURM_SCRIPT), [
    `--job-name=${slurmJobName(ctx.id)}`, `--chdir=${ctx.jobDir.dir}`, `--output=${ctx.jobDir.backendFile(SLURM_OUT)}`,
    ...resourceOptions(plan),
  ]);
  if (!submitted.ok) throw new Error(`Slurm refused the batch job: ${submitted.error}`);
  try {
    ctx.report.scheduled(submitted.value);
  } catch (err) {
    await plan.slurm.signal(submitted.value, null);
    throw err;
  }
  ctx.log.info("submitted to Slurm", { job_id: ctx.id, slurm_job_id: submitted.value, gres: plan.gres });
  return { placement: slurmPlacement(ctx, submitted.value, plan), state: { slurm_job_id: submitted.value } };
}

function batchScript(ctx: PlacementRequest, shimCommand: string[]): string {
  const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
  return [
    "#!/bin/sh",
    `# lora-worker job ${ctx.id}: the shim starts the trainer and records its end in this directory.`,
    `export ${JOB_MARKER_ENV}=${quote(ctx.id)}`,
    `exec ${[...shimCommand, "shim", ctx.jobDir.dir].map(quote).join(" ")}`,
    "",
  ].join("\n");
}

// `handedId`: the Slurm job the worker recorded in the job directory when the record could not take it.
function slurmPlacement(
  ctx: PlacementRequest, recordedId: string | null, plan: SlurmPlan, handedId: string | null = null,
): Placement {
  const { slurm } = plan;
  let pending: string | null = null;
  let running = false;
  let jobId = recordedId;
  const byName = async (): Promise<string | null> => {
    const named = await slurm.byName(slurmJobName(ctx.id));
    const found = named.ok ? named.value : null;
    if (found !== null) ctx.log.info("found the run's Slurm job by its name", { job_id: ctx.id, slurm_job_id: found });
    return found;
  };
  const find = async (): Promise<string | null> => {
    const found = handedId ?? (await byName());
    if (found === null) return null;
    try {
      ctx.report.scheduled(found);
    } catch (err) {
      ctx.log.error("could not record the run's Slurm job", { job_id: ctx.id, error: (err as Error).message });
    }
    return found;
  };
  const look = async (): Promise<JobState | null | "unknown"> => {
    jobId ??= await find();
    if (jobId === null) return null;
    const state = await slurm.state(jobId);
    if (state.ok) return state.value;
    const error = state.error;
    ctx.log.warn("could not read the Slurm job's state; asking again", { job_id: ctx.id, slurm_job_id: jobId, error });
    return "unknown";
  };
  const exit = new Promise<ExitWatch>((resolve) => {
    const tick = async () => {
      const state = await look();
      if (state === "unknown" || (state !== null && isLive(state))) {
        if (state !== "unknown") observe(state);
        setTimeout(() => void tick(), plan.pollMs);
        return;
      }
      pending = null;
      resolve(endOf(ctx, jobId ?? "(none found)", state));
    };
    void tick();
  });
  const observe = (state: JobState) => {
    const reason = state.state === "PENDING" ? state.reason : null;
    const starts = state.state === "RUNNING" && !running;
    if (reason === pending && !starts) return;
    pending = reason;
    if (starts) {
      running = true;
      ctx.report.started();
    }
    ctx.report.changed();
  };
  const ended = async (withinMs: number): Promise<boolean> => {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const state = await look();
      if (state === null || (state !== "unknown" && !isLive(state))) return true;
      if (Date.now() >= deadline) return false;
      await Bun.sleep(STOP_POLL_MS);
    }
  };
  return {
    exit,
    pgid: () => null,
    queued: () => pending,
    // TERM to every process of the job (a pending job is simply cancelled), then KILL after the grace.
    async stop(graceMs) {
      const state = await look();
      if (state === null || (state !== "unknown" && !isLive(state))) return false;
      const id = jobId!;
      const waiting = state !== "unknown" && state.state === "PENDING";
      await slurm.signal(id, waiting ? null : "TERM");
      if (await ended(graceMs)) return false;
      const killed = await slurm.signal(id, "KILL");
      if (await ended(KILL_WAIT_MS)) return true;
      throw new Error(`Slurm job ${jobId} is still live after SIGKILL${killed.ok ? "" : `: ${killed.error}`}`);
    },
    async clear() {
      if (!(await ended(KILL_WAIT_MS))) throw new Error(`Slurm job ${jobId} is still live after its end`);
      return false;
    },
  };
}

const VERDICTS: Record<string, (jobId: string) => ExitWatch> = {
  // Not by this worker, whose cancel is recorded first and so reads as cancelled.
  CANCELLED: (id) => ({ scheduler: "CANCELLED", detail: `Slurm job ${id} was cancelled outside the worker (scancel)` }),
  TIMEOUT: (id) => ({
    scheduler: "TIMEOUT",
    detail: `Slurm stopped the run at its time limit (job ${id}, sbatch --time from watchdog.tier_timeout_seconds)`,
  }),
  OUT_OF_MEMORY: (id) => ({
    scheduler: "OUT_OF_MEMORY",
    detail: `Slurm reports the run ran out of host memory (job ${id}, OUT_OF_MEMORY)`,
  }),
  NODE_FAIL: (id) => ({ scheduler: "NODE_FAIL", detail: `the node running it failed (Slurm job ${id}, NODE_FAIL)` }),
};

// Slurm's verdict outranks the shim's record (a trainer stopped at the time limit records a SIGTERM); otherwise the
// shim's record says how the trainer ended. A batch job that failed with neither never got its shim going.
function endOf(ctx: PlacementRequest, jobId: string, state: JobState | null): ExitWatch {
  const verdict = state === null ? undefined : VERDICTS[state.state];
  if (verdict) return verdict(jobId);
  const recorded = ctx.jobDir.readExit();
  if (recorded !== null) return recorded;
  if (state?.state === "FAILED") {
    const output = tail(ctx.jobDir.backendFile(SLURM_OUT));
    const spawn_error =
      `Slurm job ${jobId} failed (ExitCode=${state.exitCode}) before its shim recorded anything: ${output}`;
    return { spawn_error, ended_at: ctx.now().toISOString() };
  }
  return { lost: true };
}

function tail(path: string): string {
  try {
    return readFileSync(path, "utf8").trim().split("\n").slice(-3).join(" ") || "its output is empty";
  } catch {
    return "it wrote no output";
  }
}
