import type { Config, Device } from "../config/schema.ts";
import type { Outcome, StopReason } from "../job.ts";
import type { Logger } from "../logger.ts";
import type { Progress } from "../progress/progress.ts";
import type { GpuPlacement } from "../recipe/command.ts";
import type { JobRequest } from "../request/schema.ts";
import type { Result } from "../result.ts";
import type { ProcessIdentity } from "../os/proc.ts";
import type { DoctorCheck, Relax } from "../doctor/doctor.ts";
import type { JobDir } from "../job-dir/job-dir.ts";
import type { ExitWatch } from "./exit-watch.ts";

// The seam between the supervisor and where a run's processes live (a folder each under backends/): the backend
// that places runs and takes them back after a restart, what a run is told, what it offers, and where its processes
// are. run.ts follows a run through it the same way for every backend; nothing here names one.

/** What a backend is told to place a run: exactly what it reads, and where it reports what it learns. */
export interface PlacementRequest {
  id: string;
  jobDir: JobDir;
  /** What the job asks for: its device and tier pick what a cluster is asked for. */
  train: JobRequest;
  graceMs: number;
  now: () => Date;
  log: Logger;
  report: RunReport;
}

/** What a backend tells the supervisor of a run it placed or found; the supervisor records it. */
export interface RunReport {
  /** The shim that starts the trainer runs (this host); throws when the record cannot take it. */
  shim(identity: ProcessIdentity): void;
  /** The trainer runs (this host); a record that cannot take it is logged, the run goes on. */
  trainer(identity: ProcessIdentity): void;
  /** The scheduler holds the run under this id; throws when the record cannot take it. */
  scheduled(schedulerId: string): void;
  /** The scheduler began to run it; a record that cannot take it is logged, the run goes on. */
  started(): void;
  /** Something a watcher could see changed (why the scheduler still holds the run). */
  changed(): void;
}

/** A run's outcome, decided, that the state dir has not taken yet (it is full, say). */
export interface Unrecorded {
  outcome: Outcome;
  ended_at: string;
}

export interface Run {
  readonly id: string;
  /** The outcome while its record waits for the state dir; null until then. */
  unrecorded(): Unrecorded | null;
  pgid(): number | null;
  /** Why the scheduler still holds the run (Slurm's pending reason), or null once it runs or on this host. */
  queued(): string | null;
  progress(): Progress;
  /** Reads the trainer's output now, unless it was read less than maxAgeMs ago. */
  refresh(maxAgeMs: number): void;
  stop(reason: StopReason): Promise<void>;
  /** Stops the run right after its next state is verified; a run that ends first simply ends. */
  pause(): void;
  readonly finished: Promise<void>;
}

// Where one run's processes live and how they end: a process group on this host, or a Slurm job.
export interface Placement {
  /** The trainer's end as its shim recorded it, the scheduler's verdict, or that it was lost. */
  exit: Promise<ExitWatch>;
  /** SIGTERM to everything of the run, SIGKILL after graceMs; true when SIGKILL was needed. */
  stop(graceMs: number): Promise<boolean>;
  /** After the end: nothing of the run is left; true when that needed SIGKILL. */
  clear(graceMs: number): Promise<boolean>;
  /** The trainer's process group, when it runs on this host. */
  pgid(): number | null;
  queued(): string | null;
}

// A stop recorded before the worker restarted, carried through by the next one.
export interface PendingStop {
  reason: StopReason;
  recordedAt: number;
}

/** The worker's environment as it started, which a backend's own tools may need (Slurm's SLURM_CONF names where its
 * commands find their cluster). */
export type BackendEnvironment = Readonly<Record<string, string | undefined>>;

/** This program, which is the shim, and the PATH it runs with. */
export interface ShimCommand {
  command: string[];
  path: string;
}

export type BackendKind = Config["trainer"]["backend"];

/** A placed run, and what its backend needs to take it back after a restart (the supervisor records it). */
export interface Started {
  placement: Placement;
  state: unknown;
}

/** A run found active after a restart, handed back to the backend that placed it. */
export interface Found {
  id: string;
  train: JobRequest;
  dir: JobDir;
  /** What the job's record holds of where the run lives. */
  recorded: RecordedPlacement;
  /** What the backend handed back when it placed the run; null when the worker stopped before it could. */
  state: unknown;
  /** The pids of this host that carry the job's marker. */
  marked: number[];
}

/** Where the record says a run lives: its shim and trainer on this host, the scheduler's id, the boot they ran in. */
export interface RecordedPlacement {
  shim: ProcessIdentity | null;
  trainer: ProcessIdentity | null;
  schedulerId: string | null;
  bootId: string | null;
}

/** What a backend makes of a run found after a restart: its processes to follow, or why nothing of it is left. */
export type Recovery =
  | { placement: Placement; detail: Record<string, unknown> }
  | Gone;

/** A run a restart cannot follow, and, where the code's usual sentence would not say it, why (for the job's error). */
export interface Gone {
  gone: "host_rebooted" | "worker_restarted";
  why?: string;
}

/** A node of a cluster, with its GPUs as the cluster counts them. */
export interface ClusterNode {
  name: string;
  state: string;
  gpus: Array<{ type: string | null; total: number; allocated: number }>;
  /** The cluster's own words for what the node offers and has in use. */
  gres: string;
  gres_used: string;
}

/** Where runs are placed: a folder each under backends/, chosen in backend.ts. */
export interface Backend {
  readonly kind: BackendKind;
  /** How many runs may be active at once. */
  readonly maxActive: number;
  /** The config key that sets maxActive, for the answer that says every slot is taken; null where it is fixed. */
  readonly maxActiveKey: string | null;
  /** Whether this host's nvidia-smi judges a run's GPU before it starts (not on Slurm, which places runs itself). */
  readonly gpuAdmission: boolean;
  /** What /healthz says of the backend. */
  readonly facts: { backend: BackendKind; max_active_jobs?: number };
  /** Which GPU the trainer sees, and whether the shim passes signals on to it (a Slurm batch script does). */
  launch(device: Device): GpuPlacement & { forwardSignals: boolean };
  /** Why the backend would refuse the run, in words for arbo (what to check included), asked before anything is
   * recorded; null when it would take it. */
  refusal(request: JobRequest): Promise<string | null>;
  /** When the tier's bound ends the run (epoch ms); on Slurm its --time does. */
  deadline(startedAt: number, boundMs: number): number;
  /** Places the run whose job files are written; throws, having stopped whatever it started, when it cannot. */
  start(request: PlacementRequest): Promise<Started>;
  /** A run this backend placed, found active after a restart: its processes to follow (told as a launch is told),
   * or why nothing of it is left. */
  recover(found: Found, request: PlacementRequest): Recovery;
  /** What `lora-worker doctor` checks of where this backend runs trainers (`devDir`: where the host's devices are). */
  checks(devDir: string, relax: Relax): Promise<DoctorCheck[]>;
  /** The cluster's GPUs, node by node, where the backend is a cluster. */
  readonly nodes: (() => Promise<Result<ClusterNode[]>>) | null;
}
