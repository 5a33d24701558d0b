import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { readJsonOrNull } from "../fs.ts";
import type { ProcessIdentity } from "../os/proc.ts";

// The files a job directory holds, shared by the worker and the shim that outlives it; together they say
// what the job is and what of it is alive even when the job database is lost:
//   train.log     the trainer's stdout and stderr (appended by the trainer, cut to a cap by the shim)
//   train.log.cuts  the log's generation and where its last cut put what it kept (written by the shim: log-cut.ts)
//   dataset/      the copy of the checked dataset files the trainer reads (and caches latents beside)
//   dataset.toml  the generated dataset config the trainer reads, pointing into dataset/
//   run/          the trainer's --output_dir: its states, intermediate LoRAs, samples and final LoRA, out of arbo's
//                 reach; the worker publishes the verified final LoRA into arbo's output_dir
//   sample-prompts.json  the preview prompts the trainer reads, for a run that takes samples
//   tmp/          the trainer's TMPDIR
//   job.json      the record's origin: request and bookkeeping (written by the worker before the shim starts)
//   launch.json   what to run (written by the worker before the shim starts)
//   shim.json     the shim's identity (written by the shim before it starts the trainer)
//   trainer.json  the trainer's identity (written by the shim once it runs)
//   exit.json     how the trainer ended, or why it never started (written by the shim last, into exit.reserved:
//                 blocks the worker allocated at launch, so a full state dir cannot keep the record out)
//   slurm.sh      on the Slurm backend, the batch script that runs the shim (written before sbatch)
export interface JobPaths {
  id: string;
  dir: string;
  /** The private copy of the dataset the trainer reads. */
  dataset: string;
  /** The trainer's output directory: nothing in it is reachable by arbo's side. */
  run: string;
  log: string;
  datasetConfig: string;
  samplePrompts: string;
  hfHome: string;
}

// Every job lives in <state_dir>/jobs/<id>/; the Hugging Face cache is shared by all of them.
export function jobPaths(stateDir: string, id: string): JobPaths {
  const dir = join(stateDir, "jobs", id);
  return {
    id, dir, dataset: join(dir, "dataset"), run: join(dir, "run"), log: join(dir, "train.log"),
    datasetConfig: join(dir, "dataset.toml"), samplePrompts: join(dir, "sample-prompts.json"),
    hfHome: join(stateDir, "hf-home"),
  };
}

export interface LaunchFile {
  argv: string[];
  env: Record<string, string>;
  // Variables the shim passes on from its own environment: what Slurm sets for the job (its GPUs).
  inheritEnv?: string[];
  // The shim passes SIGTERM and SIGINT on to the trainer's group (it is a Slurm batch script); else ignores them.
  forwardSignals?: boolean;
  cwd: string;
  log: string;
  logMaxBytes: number;
}

export interface JobFile {
  id: string;
  request: unknown;
  request_hash: string;
  idempotency_key: string | null;
  admission_warning: string | null;
  simulated: boolean;
  created_at: string;
}

export type ExitFile =
  | { exit_code: number | null; signal: string | null; ended_at: string }
  | { spawn_error: string; ended_at: string };

export const jobFilePath = (dir: string) => join(dir, "job.json");
export const launchPath = (dir: string) => join(dir, "launch.json");
export const shimPath = (dir: string) => join(dir, "shim.json");
export const trainerPath = (dir: string) => join(dir, "trainer.json");
export const exitPath = (dir: string) => join(dir, "exit.json");
export const slurmScriptPath = (dir: string) => join(dir, "slurm.sh");
export const exitReservePath = (dir: string) => join(dir, "exit.reserved");
// Far more than an exit record takes (a spawn error's message included).
export const EXIT_RESERVE_BYTES = 4096;

// Written with real bytes (not a hole), so the filesystem has given the blocks already.
export function reserveExit(dir: string): void {
  writeFileSync(exitReservePath(dir), Buffer.alloc(EXIT_RESERVE_BYTES, 0x20), { mode: 0o640 });
}

export const readJobFile = (dir: string) => readJsonOrNull<JobFile>(jobFilePath(dir));
export const readShim = (dir: string) => readJsonOrNull<ProcessIdentity>(shimPath(dir));
export const readTrainer = (dir: string) => readJsonOrNull<ProcessIdentity>(trainerPath(dir));
export const readExit = (dir: string) => readJsonOrNull<ExitFile>(exitPath(dir));

// How often an adopted run's exit file and shim are looked at. A launch of ours hears its shim exit at once and
// looks only as a backstop.
const POLL_MS = 500;
const BACKSTOP_MS = 5000;

// A scheduler's own verdict on the run (Slurm's TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED): it outranks the shim's.
export interface SchedulerVerdict {
  scheduler: "TIMEOUT" | "OUT_OF_MEMORY" | "NODE_FAIL" | "CANCELLED";
  detail: string;
}

export type ExitWatch = ExitFile | { lost: true } | SchedulerVerdict;

// Resolves when the shim records the trainer's end, or when the shim is gone without a word
// (killed with -9, say): then the exit status is lost and the caller must say so.
export function watchExit(jobDir: string, shimAlive: () => boolean, shimExited?: Promise<unknown>): Promise<ExitWatch> {
  let resolve: (value: ExitWatch) => void = () => {};
  const result = new Promise<ExitWatch>((r) => (resolve = r));
  let done = false;
  const check = (allowLost: boolean) => {
    if (done) return;
    const exit = readExit(jobDir);
    if (exit) return finish(exit);
    if (allowLost && !shimAlive()) finish({ lost: true });
  };
  const finish = (value: ExitWatch) => {
    done = true;
    clearInterval(poll);
    resolve(value);
  };
  const poll = setInterval(() => check(true), shimExited ? BACKSTOP_MS : POLL_MS);
  void shimExited?.then(() => check(true));
  check(false);
  return result;
}
