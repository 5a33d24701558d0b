// The host the harness runs the compiled worker on: a state dir, a handoff root, the model root, a config in real
// mode whose trainer.accelerate is the CPU adapter, and the worker process (optionally inside a memory cgroup).
import { chmodSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodePng } from "../../src/png.ts";
import { KNOWN_PAIR } from "../../src/likeness/known-pair.ts";
import { writeSmokeDataset } from "../../src/smoke/dataset.ts";
import { jpegWithOrientation } from "../../test/support/exif.ts";

const REPO = join(import.meta.dir, "../..");

/** A port that was free a moment ago: the config names it before the worker binds it. */
export function freePort(): number {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

export interface Host {
  dir: string;
  state: string;
  handoff: string;
  config: string;
}

/** The host under `work/name` (replaced), its config naming the trainer, the base model and `port`. */
export function layOutHost(work: string, sdScripts: string, adapter: string, model: string, port: number, name = "host"): Host {
  const dir = join(work, name);
  rmSync(dir, { recursive: true, force: true });
  const state = join(dir, "state");
  const handoff = join(dir, "handoff");
  for (const path of [state, handoff]) mkdirSync(path, { recursive: true });
  chmodSync(handoff, 0o2770);
  const config = join(dir, "config.toml");
  writeFileSync(config, configText({ port, state, handoff, models: join(work, "models"), sdScripts, adapter, model }));
  return { dir, state, handoff, config };
}

interface ConfigFacts {
  port: number;
  state: string;
  handoff: string;
  models: string;
  sdScripts: string;
  adapter: string;
  model: string;
}

// No GPU here: admission is off and the one device is a name for CUDA_VISIBLE_DEVICES, which the CPU ignores.
function configText(f: ConfigFacts, extraTrainer = ""): string {
  return [
    `listen = "127.0.0.1:${f.port}"`,
    `state_dir = ${JSON.stringify(f.state)}`,
    `handoff_root = ${JSON.stringify(f.handoff)}`,
    `model_roots = [${JSON.stringify(f.models)}]`,
    "[trainer]",
    'mode = "real"',
    `accelerate = ${JSON.stringify(f.adapter)}`,
    `sd_scripts_dir = ${JSON.stringify(f.sdScripts)}`,
    extraTrainer,
    "[smoke]",
    `base_model = ${JSON.stringify(f.model)}`,
    "[gpu]",
    'admission = "off"',
    `nvidia_smi = ${JSON.stringify(join(REPO, "scripts/fake-nvidia-smi"))}`,
    "[auth]",
    'mode = "none"',
    "[[devices]]",
    "index = 0",
    'name = "CPU"',
    'class = "24gb"',
    "",
  ].join("\n");
}

/**
 * The smoke run's four pictures (two test patterns, two photos of a face) in a kohya folder, for a request the harness sends (trigger `ohwx`): their captions
 * say `smoke person, …`, but for the first, rewritten to hold the trigger; and a fifth, a phone photo stored turned
 * (EXIF orientation 6) without a caption. The worker turns it upright and puts the trigger in front of three.
 */
export async function writeDataset(host: Host, name: string): Promise<string> {
  const dataset = join(host.handoff, name, "dataset");
  const folder = join(dataset, DATASET_FOLDER);
  writeSmokeDataset(folder, KNOWN_PAIR);
  writeFileSync(join(folder, "smoke-0.txt"), "ohwx, test pattern 0, gradient, stripes\n");
  // The smoke dataset's one long caption (which makes its runs train on 150 tokens) made short again: this dataset
  // is the short-caption case, trained with no --max_token_length.
  writeFileSync(join(folder, "smoke-3.txt"), "smoke person, a photo of a face\n");
  writeFileSync(join(folder, "phone.jpg"), await jpegWithOrientation(turnedPicture(), 6));
  return dataset;
}

export const DATASET_FOLDER = "1_ohwx person";

// Wider than high as stored: upright it is 192 x 256, another bucket than the smoke pictures' square one.
function turnedPicture(): Uint8Array {
  return encodePng(256, 192, (x, y) => [x % 256, (y * 2) % 256, x < 128 ? 40 : 200]);
}

export interface Worker extends AsyncDisposable {
  url: string;
  json(path: string, init?: RequestInit): Promise<{ status: number; body: any }>;
  stop(): Promise<void>;
}

/** How often a real run's record is read: its steps take seconds on a CPU. */
export const POLL_MS = 2000;

// A real run's job polled until it has ended (minutes on a CPU): its record then.
export async function untilEnded(worker: Worker, id: string): Promise<any> {
  for (;;) {
    const { body } = await worker.json(`/train/${id}`);
    if (!["starting", "training"].includes(body.status)) return body;
    await Bun.sleep(POLL_MS);
  }
}

/** The compiled worker serving `config`; in `cgroup` (a v1 memory cgroup directory) when given. */
export async function startWorker(binary: string, config: string, log: string, cgroup?: string): Promise<Worker> {
  // A log of an earlier run would name an earlier worker's address.
  writeFileSync(log, "");
  const serve = `exec '${binary}' serve --config '${config}' >> '${log}' 2>&1`;
  const script = cgroup === undefined ? serve : `echo $$ > '${cgroup}/cgroup.procs' && ${serve}`;
  const proc = Bun.spawn(["sh", "-c", script], { stdin: "ignore" });
  const url = await untilListening(log, proc);
  const json = async (path: string, init?: RequestInit) => {
    // A pause or cancel answers when the run has stopped: minutes on a CPU.
    const res = await fetch(url + path, { ...init, timeout: false } as RequestInit);
    return { status: res.status, body: await res.json().catch(() => null) };
  };
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
  };
  return { url, json, stop, [Symbol.asyncDispose]: stop };
}

async function untilListening(log: string, proc: Bun.Subprocess): Promise<string> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`the worker exited ${proc.exitCode}; see ${log}`);
    const found = /"msg":"listening","url":"([^"]+)"/.exec(await Bun.file(log).text().catch(() => ""));
    if (found) return found[1]!;
    await Bun.sleep(100);
  }
  throw new Error(`the worker did not listen within 30 s; see ${log}`);
}
