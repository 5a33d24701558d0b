import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../../test/support/binary.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, simulateConfig, type HostTree } from "../../test/support/host-tree.ts";
import { startWorker, type WorkerProcess } from "../../test/support/worker-process.ts";
import { trackScratch } from "./cleanup.ts";
import { killAllMentioning } from "./proc.ts";

export type Tables = Record<string, Record<string, string | number | boolean>>;

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const CANCEL_TIMEOUT_MS = 10_000;

// The compiled worker as deployed: a bearer token on, listening on loopback, a scratch host around it.
export interface BenchWorker extends AsyncDisposable {
  tree: HostTree;
  worker: WorkerProcess;
  url: string;
  pid: number;
  headers: Record<string, string>;
  get(path: string): Promise<Response>;
  post(path: string, body: unknown): Promise<Response>;
  job(id: string): Promise<Record<string, any>>;
  /** The body of GET /train/{id}/events, once the worker answered 200. */
  events(id: string): Promise<ReadableStream<Uint8Array>>;
  startJob(overrides?: Record<string, unknown>): Promise<string>;
  waitForJob(id: string, done: (job: Record<string, any>) => boolean, timeoutMs?: number): Promise<Record<string, any>>;
}

export function toml(tables: Tables): string {
  return Object.entries(tables)
    .map(([name, keys]) => `[${name}]\n${Object.entries(keys).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join("\n")}\n`)
    .join("");
}

export function writeExecutable(path: string, text: string): string {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
  return path;
}

/** Real mode with `accelerate` standing in as `command` (the worker appends the launch argv). */
export function realTrainer(tree: HostTree, name: string, command: string[]): Record<string, string | number> {
  const sdScripts = join(tree.root, "sd-scripts");
  mkdirSync(sdScripts, { recursive: true });
  writeFileSync(join(sdScripts, "sdxl_train_network.py"), "");
  const quoted = command.map((word) => `'${word.replaceAll("'", `'\\''`)}'`).join(" ");
  const accelerate = writeExecutable(join(tree.root, name), `#!/bin/sh\nexec ${quoted} "$@"\n`);
  return { mode: "real", accelerate, sd_scripts_dir: sdScripts, cancel_grace_seconds: 2 };
}

/** A trainer written in TypeScript under bench/, run by this same Bun. */
export function bunTrainer(tree: HostTree, script: string, args: string[]): Record<string, string | number> {
  return realTrainer(tree, "accelerate", [process.execPath, join(import.meta.dir, script), ...args, "--"]);
}

export const FAKE_GPU: Record<string, string> = { nvidia_smi: FAKE_NVIDIA_SMI };

// The token is on as in production; a benchmark's own tables override the fake GPU and add to the rest.
function writeBenchConfig(tree: HostTree, asked: Tables): Record<string, string> {
  const token = crypto.randomUUID().replaceAll("-", "");
  const tokenFile = join(tree.root, "token");
  writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  const tables: Tables = { ...asked, gpu: { ...FAKE_GPU, ...asked.gpu }, auth: { token_file: tokenFile, ...asked.auth } };
  writeFileSync(tree.configPath, simulateConfig(tree) + toml(tables));
  return { authorization: `Bearer ${token}` };
}

const OUTPUT_LINES_ON_DEATH = 20;

async function disposeHost(tree: HostTree, untrack: () => void, worker?: WorkerProcess): Promise<void> {
  // A worker that died under a benchmark says why in its last lines; nothing else would.
  if (worker && worker.proc.exitCode !== null) {
    const tail = worker.output().trimEnd().split("\n").slice(-OUTPUT_LINES_ON_DEATH).join("\n");
    process.stderr.write(`the worker exited ${worker.proc.exitCode} during the benchmark; its last output:\n${tail}\n`);
  }
  await worker?.[Symbol.asyncDispose]();
  await killAllMentioning(tree.root);
  tree[Symbol.dispose]();
  untrack();
}

/** `binary` defaults to this tree's build; another build (an older commit's) measures a before. */
export async function startBenchWorker(opts: { tree?: HostTree; tables: (tree: HostTree) => Tables; binary?: string }): Promise<BenchWorker> {
  const tree = opts.tree ?? makeHostTree();
  const untrack = trackScratch(tree.root);
  const headers = writeBenchConfig(tree, opts.tables(tree));
  let worker: WorkerProcess;
  try {
    worker = await startWorker(tree.configPath, { command: [opts.binary ?? ensureBinary()] });
  } catch (err) {
    await disposeHost(tree, untrack);
    throw err;
  }
  const get = (path: string) => fetch(worker.url + path, { headers });
  const post = (path: string, body: unknown) =>
    fetch(worker.url + path, { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify(body) });
  const job = async (id: string) => (await (await get(`/train/${id}`)).json()) as Record<string, any>;
  return {
    tree, worker, url: worker.url, pid: worker.proc.pid, headers, get, post, job,
    async events(id) {
      const res = await get(`/train/${id}/events`);
      if (res.status !== 200 || !res.body) throw new Error(`GET /train/${id}/events answered ${res.status}`);
      return res.body;
    },
    waitForJob: (id, done, timeoutMs = 30_000) => waitForJob(() => job(id), done, timeoutMs),
    async startJob(overrides = {}) {
      const res = await post("/train", tree.validRequest(overrides));
      const body = (await res.json()) as Record<string, any>;
      if (res.status !== 200) throw new Error(`POST /train answered ${res.status}: ${JSON.stringify(body)}`);
      return body.worker_job_id as string;
    },
    async [Symbol.asyncDispose]() {
      // Cleanup must not mask the error that got us here; what a cancel misses is killed by pid.
      await cancelActive(get, post).catch(() => undefined);
      await disposeHost(tree, untrack, worker);
    },
  };
}

async function waitForJob(read: () => Promise<Record<string, any>>, done: (job: Record<string, any>) => boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = await read();
    if (done(job)) return job;
    if (isTerminal(job) || Date.now() > deadline) throw new Error(`job ended or took over ${timeoutMs} ms before getting there: ${JSON.stringify(job)}`);
    await Bun.sleep(5);
  }
}

// The worker's shims and trainers outlive it by design, so a job is cancelled before the worker goes.
async function cancelActive(get: (p: string) => Promise<Response>, post: (p: string, b: unknown) => Promise<Response>) {
  const health = (await (await get("/healthz")).json()) as { active_job_id: string | null };
  if (health.active_job_id === null) return;
  await Promise.race([post(`/train/${health.active_job_id}/cancel`, {}), Bun.sleep(CANCEL_TIMEOUT_MS)]);
}

export const isTerminal = (job: Record<string, any>) => TERMINAL.has(job.status);
