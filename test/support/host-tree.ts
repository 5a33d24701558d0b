import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
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
      writeFileSync(configPath, simulateConfig(tree) + extra);
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

export const SIMULATE_TABLES = (secondsPerStep: number) =>
  `[trainer]\nmode = "simulate"\ncancel_grace_seconds = 2\n[simulate]\nseconds_per_step = ${secondsPerStep}\n[gpu]\nnvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}\n`;
// The same, with the simulator told to fail as `plan` says (the simulate.fail grammar).
export const FAILING_TABLES = (secondsPerStep: number, plan: string) =>
  SIMULATE_TABLES(secondsPerStep).replace("[gpu]", `fail = ${JSON.stringify(plan)}\n[gpu]`);
