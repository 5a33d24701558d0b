import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { unlinkTmp } from "../../src/job-dir/tmp-link.ts";
import { CHECKPOINT_KEYS, writeCheckpoint } from "./checkpoints.ts";
import { solidPng } from "../../src/png.ts";

export const REPO = join(import.meta.dir, "../..");
export const MAIN = join(REPO, "src/main.ts");
export const FAKE_NVIDIA_SMI = join(REPO, "scripts/fake-nvidia-smi");

// A scratch host: handoff root, models root, state dir, one small dataset and one base model.
export interface HostTree extends Disposable {
  root: string;
  handoff: string;
  models: string;
  state: string;
  dataset: string;
  model: string;
  configPath: string;
  validRequest(overrides?: Record<string, unknown>): Record<string, unknown>;
  writeConfig(extra?: string): string;
}

/** The output_dir of the tree's valid request. */
export const outDir = (tree: HostTree) => join(tree.handoff, "job1", "out");

export const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");

/** A decodable PNG padded to `bytes` (decoders stop at IEND): an image big enough to hold a copy on it. */
export function paddedPng(bytes: number): Uint8Array {
  const padded = new Uint8Array(bytes);
  padded.set(solidPng(8, 8, [0, 120, 200]));
  return padded;
}

export function makeHostTree(images = 3): HostTree {
  const root = mkdtempSync(join(tmpdir(), "lora-worker-test-"));
  const handoff = join(root, "handoff");
  const models = join(root, "models");
  const state = join(root, "state");
  const dataset = join(handoff, "job1", "dataset");
  for (const dir of [handoff, models, state, dataset]) mkdirSync(dir, { recursive: true });
  // Real pictures, each its own colour: the worker decodes every image of its copy before the trainer starts.
  for (let i = 0; i < images; i++) writeFileSync(join(dataset, `img${i}.png`), solidPng(8, 8, [i * 40, 120, 200]));
  const model = writeCheckpoint(join(models, "sdxl.safetensors"), CHECKPOINT_KEYS.sdxl);
  const configPath = join(root, "config.toml");
  const tree: HostTree = {
    root, handoff, models, state, dataset, model, configPath,
    validRequest: (overrides = {}) => ({
      dataset_dir: dataset,
      base_model_path: model,
      output_dir: join(handoff, "job1", "out"),
      output_name: "mylora",
      trigger: "ohwx",
      subject_class: "person",
      repeats: 2,
      tier: "fast",
      device_index: 0,
      seed: 42,
      ...overrides,
    }),
    writeConfig(extra = "") {
      writeFileSync(configPath, withOwnTokenFiles(simulateConfig(tree) + extra, root));
      return configPath;
    },
    [Symbol.dispose]() {
      removeTmpLinks(tree.state);
      rmSync(root, { recursive: true, force: true });
    },
  };
  return tree;
}

// The trainer's TMPDIR links in /dev/shm that a shim killed with -9 (a crash test) never removed.
function removeTmpLinks(state: string): void {
  const jobs = join(state, "jobs");
  for (const id of existsSync(jobs) ? readdirSync(jobs) : []) unlinkTmp(join(jobs, id));
}

export function simulateConfig(tree: Pick<HostTree, "handoff" | "models" | "state">): string {
  return [
    `listen = "127.0.0.1:0"`,
    `state_dir = ${JSON.stringify(tree.state)}`,
    `handoff_root = ${JSON.stringify(tree.handoff)}`,
    `model_roots = [${JSON.stringify(tree.models)}]`,
    "",
  ].join("\n");
}

// The defaults name /etc/lora-worker/token and read-token: on a host with a worker installed, a test's worker would
// then want that host's token, and its doctor judge that host's files. A tree's config names files of its own (not
// written: no token, so a loopback worker runs open, as on a bare host) wherever its [auth] names none.
export function withOwnTokenFiles(toml: string, root: string): string {
  const own = { token_file: join(root, "no-token"), read_token_file: join(root, "no-read-token") };
  const header = /^\[auth\][ \t]*$/m.exec(toml);
  const start = header === null ? toml.length : header.index + header[0].length;
  const next = toml.slice(start).search(/^\[/m);
  const table = toml.slice(start, next < 0 ? toml.length : start + next);
  const missing = Object.entries(own).filter(([key]) => !new RegExp(`^\\s*${key}\\s*=`, "m").test(table));
  const lines = missing.map(([key, path]) => `\n${key} = ${JSON.stringify(path)}`).join("");
  if (header === null) return `${toml}${toml === "" || toml.endsWith("\n") ? "" : "\n"}[auth]${lines}\n`;
  return toml.slice(0, start) + lines + toml.slice(start);
}

/** Throws where a worker's config would read the host's token files (see withOwnTokenFiles). */
export function assertOwnTokenFiles(configPath: string): void {
  let auth: Record<string, unknown> = {};
  try {
    auth = (Bun.TOML.parse(readFileSync(configPath, "utf8")) as { auth?: Record<string, unknown> }).auth ?? {};
  } catch {
    return; // the worker refuses the file itself
  }
  const unnamed = ["token_file", "read_token_file"].filter((key) => auth.mode !== "none" && auth[key] === undefined);
  if (unnamed.length > 0) {
    throw new Error(`${configPath} names no auth.${unnamed.join(" or auth.")}: its worker would read the host's ` +
      "/etc/lora-worker/ (use tree.writeConfig, or withOwnTokenFiles)");
  }
}

export const SIMULATE_TABLES = (secondsPerStep: number) =>
  `[trainer]\nmode = "simulate"\ncancel_grace_seconds = 2\n[simulate]\nseconds_per_step = ${secondsPerStep}\n[gpu]\nnvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}\n`;
// The same, with the simulator told to fail as `plan` says (the simulate.fail grammar).
export const FAILING_TABLES = (secondsPerStep: number, plan: string) =>
  SIMULATE_TABLES(secondsPerStep).replace("[gpu]", `fail = ${JSON.stringify(plan)}\n[gpu]`);
