import { chmodSync, constants, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { waitFor, within } from "./wait.ts";
import { mayAccess } from "../../src/fs.ts";

// A real single-node Slurm cluster (Debian 12's 22.05) for tests. munged, slurmctld and slurmd run as
// foreground children of the test process with every file (key, configs, state, spool, logs) under one
// temp dir. GPUs are gres whose device files are symlinks to /dev/null: jobs get CUDA_VISIBLE_DEVICES,
// SLURM_JOB_GPUS and GPU_DEVICE_ORDINAL. Memory is a consumable resource (1 GiB a job unless sbatch --mem
// says otherwise) that task/cgroup enforces: a job past it is OOM-killed and ends OUT_OF_MEMORY.
// proctrack/cgroup puts each job in a freezer cgroup: scancel sends SIGCONT and SIGTERM to the batch script
// alone, then, max(KillWait, 5) s later, SIGKILL to the whole cgroup, setsid escapees included.
// proctrack/linuxproc (the contrast) signals the descendants it finds through parent links, so a
// double-forked process escapes it.

export interface SlurmClusterOptions {
  gpus?: number;
  gpuType?: string;
  killWaitSeconds?: number;
  minJobAgeSeconds?: number;
  proctrack?: "cgroup" | "linuxproc";
}

export interface SlurmCluster extends AsyncDisposable {
  dir: string;
  env: Record<string, string>;
  nodeName: string;
  partition: string;
  run(args: string[]): { exitCode: number; stdout: string; stderr: string };
  jobState(id: string): Record<string, string>;
  // Moves a running job's end time to now. slurmctld checks time limits every 30 s (a compile-time
  // constant), so the job turns TIMEOUT 0-30 s later; a shorter TimeLimit is rounded up to a minute.
  expireTimeLimit(id: string): Promise<unknown>;
}

// slurmd sends SIGKILL max(KillWait, 5) s after SIGTERM, so less than 5 buys nothing.
const DEFAULTS = { gpus: 2, gpuType: "a6000", killWaitSeconds: 5, minJobAgeSeconds: 300, proctrack: "cgroup" } as const;
const PARTITION = "test";
const CONF_TEMPLATE = join(import.meta.dir, "..", "fixtures", "slurm", "slurm.conf");
const SBIN_PATH = `${process.env.PATH ?? ""}:/usr/sbin:/sbin`;
const DAEMONS = ["munged", "slurmctld", "slurmd"] as const;
const CLIENTS = ["sbatch", "scontrol", "scancel", "squeue", "sinfo", "sacct"] as const;
const FREEZER = "/sys/fs/cgroup/freezer";
const START_TIMEOUT_MS = 20_000;
const STOP_TIMEOUT_MS = 10_000;
const LOG_TAIL_LINES = 15;
// task/cgroup names a job's cgroup by node and id (/sys/fs/cgroup/<controller>/slurm_<node>/uid_0/job_<id>), and
// every cluster here names its node after the host: clusters alive at once (files side by side, or two in one file)
// must not share an id. Each starts its ids at its controller's port times this; no two live controllers hold one port.
const JOB_IDS_PER_CLUSTER = 1000;

// Why a cluster cannot be started here, or null.
export function slurmUnavailable(): string | null {
  const missing = [...DAEMONS, ...CLIENTS].filter((name) => !Bun.which(name, { PATH: SBIN_PATH }));
  if (missing.length > 0) return `missing ${missing.join(", ")} (scripts/setup.sh --test-tools installs them)`;
  if (process.getuid?.() !== 0) return "the Slurm daemons run as root (SlurmUser=root) and this is not root";
  // Only cgroup v1 was verified: 22.05's cgroup/v2 refuses a hybrid host like the one these tests were built on.
  if (!mayAccess(FREEZER, constants.W_OK)) return `proctrack/cgroup needs a writable cgroup v1 freezer hierarchy at ${FREEZER}`;
  return null;
}

export async function startSlurmCluster(opts: SlurmClusterOptions = {}): Promise<SlurmCluster> {
  const problem = slurmUnavailable();
  if (problem !== null) throw new Error(`cannot start a Slurm cluster: ${problem}`);
  const dir = mkdtempSync(join(tmpdir(), "slurm-cluster-"));
  const nodeName = hostname().split(".")[0]!;
  const env = { SLURM_CONF: join(dir, "slurm.conf") };
  const daemons = new Map<string, Subprocess>();
  const run = (args: string[]) => runClient(args, env);
  const cluster: SlurmCluster = {
    dir,
    env,
    nodeName,
    partition: PARTITION,
    run,
    jobState: (id) => parseJobRecord(checked(run(["scontrol", "show", "job", "-o", id]), `scontrol show job ${id}`)),
    // Slurm refuses an end time that is not after the job's start (a job started within this second): asked again.
    expireTimeLimit: (id) =>
      waitFor(() => run(["scontrol", "update", `JobId=${id}`, "EndTime=now"]).exitCode === 0, `Slurm to take job ${id}'s end time`),
    [Symbol.asyncDispose]: () => stopCluster(dir, daemons, run, opts.killWaitSeconds ?? DEFAULTS.killWaitSeconds),
  };
  try {
    writeClusterFiles(dir, nodeName, { ...DEFAULTS, ...opts });
    await startDaemons(dir, nodeName, daemons, run);
  } catch (error) {
    const logs = logTails(dir);
    await cluster[Symbol.asyncDispose]();
    throw new Error(`${(error as Error).message}\n${logs}`, { cause: error });
  }
  return cluster;
}

function writeClusterFiles(dir: string, node: string, s: Required<SlurmClusterOptions>): void {
  chmodSync(dir, 0o755); // munged refuses a socket in a directory that not everyone may enter
  for (const sub of ["state", "spool", "log"]) mkdirSync(join(dir, sub));
  writeFileSync(join(dir, "munge.key"), crypto.getRandomValues(new Uint8Array(1024)), { mode: 0o400 });
  const gpus = Array.from({ length: s.gpus }, (_, i) => join(dir, `gpu${i}`));
  for (const gpu of gpus) symlinkSync("/dev/null", gpu);
  const [ctldPort, slurmdPort] = freePorts(2);
  const values: Record<string, string | number> = {
    DIR: dir, NODE: node, PARTITION, CTLD_PORT: ctldPort!, SLURMD_PORT: slurmdPort!, PROCTRACK: s.proctrack,
    FIRST_JOB_ID: ctldPort! * JOB_IDS_PER_CLUSTER,
    KILL_WAIT: s.killWaitSeconds, MIN_JOB_AGE: s.minJobAgeSeconds, NODE_GRES: s.gpus > 0 ? `Gres=gpu:${s.gpuType}:${s.gpus}` : "",
  };
  const conf = readFileSync(CONF_TEMPLATE, "utf8").replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    if (!(key in values)) throw new Error(`${CONF_TEMPLATE} names {{${key}}}, which has no value`);
    return String(values[key]);
  });
  writeFileSync(join(dir, "slurm.conf"), conf);
  const gres = gpus.map((file) => `NodeName=${node} Name=gpu Type=${s.gpuType} File=${file}\n`);
  writeFileSync(join(dir, "gres.conf"), ["AutoDetect=off\n", ...gres].join(""));
  // MinRAMSpace (MB): below its default of 30 a test can ask for less memory than a run needs.
  writeFileSync(join(dir, "cgroup.conf"), "CgroupPlugin=cgroup/v1\nConstrainRAMSpace=yes\nMinRAMSpace=1\n");
  writeFileSync(join(dir, "plugstack.conf"), "");
}

async function startDaemons(dir: string, node: string, daemons: Map<string, Subprocess>, run: SlurmCluster["run"]) {
  const socket = join(dir, "munge.socket");
  const mungeFiles = [`--key-file=${dir}/munge.key`, `--socket=${socket}`, `--pid-file=${dir}/munged.pid`,
    `--seed-file=${dir}/munged.seed`, `--log-file=${dir}/log/munged.log`];
  daemons.set("munged", spawnDaemon(dir, "munged", ["-F", ...mungeFiles]));
  await waitUntil(daemons, () => existsSync(socket), "munged's socket");
  daemons.set("slurmctld", spawnDaemon(dir, "slurmctld", ["-D"]));
  daemons.set("slurmd", spawnDaemon(dir, "slurmd", ["-D"]));
  const idle = () => run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"]).stdout.trim() === "idle";
  await waitUntil(daemons, idle, `node ${node} to be idle`);
}

function spawnDaemon(dir: string, name: string, args: string[]): Subprocess {
  const path = Bun.which(name, { PATH: SBIN_PATH })!;
  const stderr = Bun.file(join(dir, "log", `${name}.stderr`));
  const env = { ...process.env, SLURM_CONF: join(dir, "slurm.conf") };
  return Bun.spawn([path, ...args], { env, stdin: "ignore", stdout: "ignore", stderr });
}

// Waits for the condition, failing at once if a daemon exits meanwhile.
async function waitUntil(daemons: Map<string, Subprocess>, ready: () => boolean, what: string): Promise<void> {
  await waitFor(() => {
    for (const [name, proc] of daemons) {
      if (!isRunning(proc)) throw new Error(`${name} exited (${proc.exitCode ?? proc.signalCode}) while waiting for ${what}`);
    }
    return ready();
  }, what, START_TIMEOUT_MS);
}

// Jobs first: their slurmstepd outlives slurmd by design, so only scancel ends them.
async function stopCluster(dir: string, daemons: Map<string, Subprocess>, run: SlurmCluster["run"], killWait: number) {
  try {
    if (isRunning(daemons.get("slurmctld")) && isRunning(daemons.get("slurmd"))) {
      run(["scancel", "--partition", PARTITION]);
      const drained = () => run(["squeue", "-h", "-p", PARTITION, "-o", "%i"]).stdout.trim() === "";
      await waitFor(drained, "every job to end after scancel", (Math.max(killWait, 5) + 20) * 1000);
    }
  } finally {
    for (const name of ["slurmd", "slurmctld", "munged"]) await stopDaemon(daemons.get(name));
    rmSync(dir, { recursive: true, force: true });
  }
}

async function stopDaemon(proc: Subprocess | undefined): Promise<void> {
  if (proc === undefined || !isRunning(proc)) return;
  proc.kill("SIGTERM");
  if ((await within(proc.exited, STOP_TIMEOUT_MS)) === "deadline") {
    proc.kill("SIGKILL");
    await proc.exited;
  }
}

const isRunning = (proc: Subprocess | undefined): boolean => proc !== undefined && proc.exitCode === null && proc.signalCode === null;

function runClient(args: string[], env: Record<string, string>) {
  const result = Bun.spawnSync(args, { env: { ...process.env, ...env }, stdin: "ignore" });
  return { exitCode: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() };
}

function checked(result: ReturnType<SlurmCluster["run"]>, what: string): string {
  if (result.exitCode !== 0) throw new Error(`${what} exited ${result.exitCode}: ${result.stderr.trim()}`);
  return result.stdout;
}

// `scontrol show job -o` prints one line of Key=Value pairs; a value may hold spaces, so split before each
// key (a value that itself holds " word=" is misread: Slurm does not quote).
function parseJobRecord(line: string): Record<string, string> {
  const pairs = line.trim().matchAll(/([A-Za-z][\w:/]*)=(.*?)(?=\s+[A-Za-z][\w:/]*=|\s*$)/g);
  return Object.fromEntries(Array.from(pairs, ([, key, value]) => [key!, value!]));
}

// Ports the kernel just handed out, held together so that the two differ.
function freePorts(count: number): number[] {
  const listeners = Array.from({ length: count }, () => Bun.listen({ hostname: "0.0.0.0", port: 0, socket: { data() {} } }));
  const ports = listeners.map((listener) => listener.port);
  for (const listener of listeners) listener.stop(true);
  return ports;
}

// The last lines each daemon wrote to stderr (where a fatal config error goes), for an error that would
// otherwise say only "timed out".
function logTails(dir: string): string {
  if (!existsSync(join(dir, "log"))) return "";
  const logs = readdirSync(join(dir, "log")).filter((name) => name.endsWith(".stderr")).map((name) => {
    const lines = readFileSync(join(dir, "log", name), "utf8").trimEnd().split("\n").slice(-LOG_TAIL_LINES);
    return `--- ${name}\n${lines.join("\n")}`;
  });
  return logs.join("\n");
}
