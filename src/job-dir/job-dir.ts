import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { readJsonOrNull, sizeOf, writeJsonAtomic } from "../fs.ts";
import type { ProcessIdentity } from "../os/proc.ts";
import { cutsNow, repairedCuts } from "./log-cut.ts";
import { tmpFolder, tmpLink, unlinkTmp } from "./tmp-link.ts";

// The files a job directory holds, shared by the worker and the shim that outlives it; together they say
// what the job is and what of it is alive even when the job database is lost:
//   train.log     the trainer's stdout and stderr (appended by the trainer, cut to a cap by the shim)
//   train.log.cuts  the log's generation and where its last cut put what it kept (written by the shim: log-cut.ts)
//   dataset/      the copy of the checked dataset files the trainer reads (and caches latents beside)
//   dataset.toml  the generated dataset config the trainer reads, pointing into dataset/
//   run/          the trainer's --output_dir: its states, intermediate LoRAs, samples and final LoRA, out of arbo's
//                 reach; the worker publishes the verified final LoRA into arbo's output_dir
//   sample-prompts.json  the preview prompts the trainer reads, for a run that takes samples
//   tmp/          the trainer's temporary files; its TMPDIR is a short link to here (tmp-link.ts), removed with it
//   job.json      the record's origin: request and bookkeeping (written by the worker before the shim starts)
//   launch.json   what to run (written by the worker before the shim starts)
//   placement.json  which backend placed the run, and that backend's own state (written by the worker: before the
//                 backend places it, and again with the state the backend handed back)
//   shim.json     the shim's identity (written by the shim before it starts the trainer)
//   trainer.json  the trainer's identity (written by the shim once it runs)
//   exit.json     how the trainer ended, or why it never started (written by the shim last, into exit.reserved:
//                 blocks the worker allocated at launch, so a full state dir cannot keep the record out)
//   (a backend's own files: Slurm's slurm.sh, the batch script that runs the shim, and slurm.out, its output)
/** One job's directory: its paths, and every write or removal of its files the worker makes. */
export interface JobDir {
  readonly id: string;
  readonly dir: string;
  /** The private copy of the dataset the trainer reads. */
  readonly dataset: string;
  /** The trainer's output directory: nothing in it is reachable by arbo's side. */
  readonly run: string;
  readonly log: string;
  readonly datasetConfig: string;
  readonly samplePrompts: string;
  readonly hfHome: string;
  /** The trainer's TMPDIR: a short link to the job's tmp folder, which the shim makes where the trainer runs. */
  readonly tmp: string;
  exists(): boolean;
  /** At the claim: the directory with its dataset, run and tmp folders; on failure nothing of it is left. */
  create(): void;
  /** A file the backend that places the run keeps in the directory (its batch script, its output). */
  backendFile(name: string): string;
  /** Before the backend places the run: a script of its own, executable by the job's account. */
  writeBackendScript(name: string, text: string): void;
  /** What the trainer reads besides its dataset, and where it writes: its TMPDIR and its output directory. */
  writeRecipe(files: { datasetToml: string; samplePrompts?: string }): void;
  /** Before the shim starts: what the job is and what to run, the exit record's blocks, the log. */
  writeLaunch(launch: LaunchFile, job: JobFile): void;
  readJob(): JobFile | null;
  /** Which backend placed the run and its state, for the restart that hands it back to that backend. */
  writePlacement(file: PlacementFile): void;
  /** null when there is none; one that cannot be read or names no backend throws, saying what is wrong with it. */
  readPlacement(): PlacementFile | null;
  readShim(): ProcessIdentity | null;
  readTrainer(): ProcessIdentity | null;
  readExit(): ExitFile | null;
  /** After the run: a cut record its shim left half written (killed in a cut) is repaired, to be trusted again. */
  repairLogCuts(): void;
  removeDataset(): void;
  /** The whole directory and the TMPDIR link, off the event loop; returns the bytes it held. */
  remove(): Promise<number>;
  /** The whole directory and the TMPDIR link, at once (at start-up, before any request). */
  removeNow(): void;
}

/** Where every job directory lives: created by `serve` at start-up. */
export const jobsDir = (stateDir: string) => join(stateDir, "jobs");

/** The job directories of one state dir: handed out once, by `createWorker`. */
export interface JobDirs {
  /** The folder that holds them all. */
  readonly root: string;
  of(id: string): JobDir;
}

/** The job directories of `stateDir`. */
export const jobDirs = (stateDir: string): JobDirs => ({ root: jobsDir(stateDir), of: (id) => jobDir(stateDir, id) });

/** Every job lives in <state_dir>/jobs/<id>/; the Hugging Face cache is shared by all of them. */
export function jobDir(stateDir: string, id: string): JobDir {
  const dir = join(jobsDir(stateDir), id);
  const dataset = join(dir, "dataset");
  const run = join(dir, "run");
  const log = join(dir, "train.log");
  const [datasetConfig, samplePrompts] = [join(dir, "dataset.toml"), join(dir, "sample-prompts.json")];
  return {
    id, dir, dataset, run, log, datasetConfig, samplePrompts,
    hfHome: join(stateDir, "hf-home"),
    tmp: tmpLink(dir),
    exists: () => existsSync(dir),
    create() {
      mkdirSync(jobsDir(stateDir), { recursive: true, mode: 0o750 });
      mkdirSync(dir, { mode: 0o750 });
      try {
        for (const folder of [dataset, run, tmpFolder(dir)]) mkdirSync(folder, { mode: 0o750 });
      } catch (err) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    },
    backendFile: (name) => join(dir, name),
    writeBackendScript: (name, text) => writeFileSync(join(dir, name), text, { mode: 0o750 }),
    writeRecipe(files) {
      writeFileSync(datasetConfig, files.datasetToml, { mode: 0o640 });
      if (files.samplePrompts !== undefined) writeFileSync(samplePrompts, files.samplePrompts, { mode: 0o640 });
    },
    writeLaunch(launch, job) {
      writeJsonAtomic(jobFilePath(dir), job);
      writeJsonAtomic(launchPath(dir), launch);
      reserveExit(dir);
      closeSync(openSync(log, "a", 0o640));
    },
    readJob: () => readJsonOrNull<JobFile>(jobFilePath(dir)),
    writePlacement: (file) => writeJsonAtomic(join(dir, "placement.json"), file),
    readPlacement: () => readPlacement(join(dir, "placement.json")),
    readShim: () => readJsonOrNull<ProcessIdentity>(shimPath(dir)),
    readTrainer: () => readTrainer(dir),
    readExit: () => readExit(dir),
    repairLogCuts() {
      const launch = readJsonOrNull<LaunchFile>(launchPath(dir));
      if (cutsNow(log) === "unsettled" && launch !== null) repairedCuts(log, launch.logMaxBytes);
    },
    removeDataset: () => rmSync(dataset, { recursive: true, force: true }),
    async remove() {
      const bytes = await sizeOf(dir);
      await rm(dir, { recursive: true, force: true });
      unlinkTmp(dir);
      return bytes;
    },
    removeNow() {
      rmSync(dir, { recursive: true, force: true });
      unlinkTmp(dir);
    },
  };
}

export interface LaunchFile {
  argv: string[];
  env: Record<string, string>;
  /** Variables the shim passes on from its own environment: what Slurm sets for the job (its GPUs). */
  inheritEnv?: string[];
  /** The shim passes SIGTERM and SIGINT on to the trainer's group (it is a Slurm batch script); else ignores them. */
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

/** Which backend placed a run, by its kind, and that backend's own state of it (null until it has placed it). */
export interface PlacementFile {
  backend: string;
  state: unknown;
}

export type ExitFile =
  | { exit_code: number | null; signal: string | null; ended_at: string }
  | { spawn_error: string; ended_at: string };

const jobFilePath = (dir: string) => join(dir, "job.json");
export const launchPath = (dir: string) => join(dir, "launch.json");
export const shimPath = (dir: string) => join(dir, "shim.json");
export const trainerPath = (dir: string) => join(dir, "trainer.json");
export const exitPath = (dir: string) => join(dir, "exit.json");
export const exitReservePath = (dir: string) => join(dir, "exit.reserved");
// Far more than an exit record takes (a spawn error's message included).
const EXIT_RESERVE_BYTES = 4096;

// Written with real bytes (not a hole), so the filesystem has given the blocks already.
function reserveExit(dir: string): void {
  writeFileSync(exitReservePath(dir), Buffer.alloc(EXIT_RESERVE_BYTES, 0x20), { mode: 0o640 });
}

// What is wrong is said of "placement.json", not its path: the sentence may reach the job's record, which arbo reads.
function readPlacement(path: string): PlacementFile | null {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return null;
    throw new Error(`placement.json cannot be read (${code ?? (err as Error).message})`);
  }
  let file: unknown;
  try {
    file = JSON.parse(text);
  } catch {
    throw new Error("placement.json is not JSON");
  }
  const backend = typeof file === "object" && file !== null ? (file as { backend?: unknown }).backend : undefined;
  if (typeof backend !== "string") throw new Error("placement.json names no backend");
  return file as PlacementFile;
}

export const readTrainer = (dir: string) => readJsonOrNull<ProcessIdentity>(trainerPath(dir));
export const readExit = (dir: string) => readJsonOrNull<ExitFile>(exitPath(dir));
