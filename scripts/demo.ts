// The newcomer's end-to-end run: a worker with the simulated trainer on a scratch host,
// one real POST /train, progress until the end, and the LoRA's sha256 checked on disk.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { safetensorsParts } from "../src/safetensors/write.ts";

const REPO = join(import.meta.dir, "..");
const SECONDS_PER_STEP = 0.02;
// An 8×8 PNG: the simulator only counts images, but the dataset should look like one.
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEUlEQVR4nGM4URGAFTEMLQkAMRFkARSGGiwAAAAASUVORK5CYII=", "base64");

const useBinary = process.argv.includes("--binary");
const root = mkdtempSync(join(tmpdir(), "lora-worker-demo-"));
const handoff = join(root, "train");
const dataset = join(handoff, "demo-job", "dataset", "10_ohwx person");
mkdirSync(dataset, { recursive: true });
mkdirSync(join(root, "models"));
mkdirSync(join(root, "state"));
for (let i = 0; i < 4; i++) writeFileSync(join(dataset, `img${i}.png`), PNG);
writeFileSync(join(root, "models", "sdxl-base.safetensors"), Buffer.concat(sdxlPlaceholder()));
const configPath = join(root, "config.toml");
writeFileSync(
  configPath,
  `listen = "127.0.0.1:0"
state_dir = "${root}/state"
handoff_root = "${handoff}"
model_roots = ["${root}/models"]
[trainer]
mode = "simulate"
[simulate]
seconds_per_step = ${SECONDS_PER_STEP}
[gpu]
nvidia_smi = "${REPO}/scripts/fake-nvidia-smi"
`,
);

const command = useBinary ? [join(REPO, "dist/lora-worker")] : [process.execPath, join(REPO, "src/main.ts")];
const worker = Bun.spawn([...command, "serve", "--config", configPath], { stdout: "pipe", stderr: "inherit" });
const url = await listeningUrl(worker.stdout);
console.log(`worker up at ${url} (${useBinary ? "compiled binary" : "from source"}), scratch host in ${root}`);

try {
  const health = await (await fetch(`${url}/healthz`)).json();
  console.log("GET /healthz", JSON.stringify(health));
  const gpus = (await (await fetch(`${url}/gpu-status`)).json()) as { devices: Array<{ index: number; name: string; memory_free_mib: number }> };
  console.log("GET /gpu-status", gpus.devices.map((d) => `#${d.index} ${d.name} ${d.memory_free_mib} MiB free`).join(", "));
  const request = {
    dataset_dir: join(handoff, "demo-job", "dataset"),
    base_model_path: join(root, "models", "sdxl-base.safetensors"),
    output_dir: join(handoff, "demo-job", "out"),
    output_name: "ohwx_person",
    trigger: "ohwx",
    subject_class: "person",
    repeats: 10,
    tier: "fast",
    device_index: 0,
    seed: 1234,
  };
  const res = await fetch(`${url}/train`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request) });
  const dispatched = (await res.json()) as { worker_job_id: string; status: string };
  console.log(`POST /train -> ${res.status}`, JSON.stringify(dispatched));
  if (res.status !== 200) process.exit(1);
  const job = await follow(`${url}/train/${dispatched.worker_job_id}`);
  console.log("final record", JSON.stringify(job, null, 2));
  const log = await (await fetch(`${url}/train/${dispatched.worker_job_id}/log?lines=6`)).text();
  console.log(`last log lines:\n${log}`);
  if (job.status !== "succeeded") throw new Error(`job ended ${job.status}`);
  const onDisk = new Bun.CryptoHasher("sha256").update(await Bun.file(job.lora_path).arrayBuffer()).digest("hex");
  if (onDisk !== job.lora_sha256) throw new Error(`sha256 mismatch: record ${job.lora_sha256}, disk ${onDisk}`);
  console.log(`OK: ${job.lora_path} (${job.lora_bytes} bytes) matches lora_sha256 ${onDisk}`);
} finally {
  worker.kill("SIGTERM");
  await worker.exited;
  rmSync(root, { recursive: true, force: true });
}

// Keeps reading the worker's log for the whole run (a closed pipe would cost it its stdout).
async function listeningUrl(stdout: ReadableStream<Uint8Array>): Promise<string> {
  const reader = stdout.getReader();
  let seen = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`the worker exited before listening:\n${seen}`);
    seen += new TextDecoder().decode(value);
    const url = /"msg":"listening","url":"([^"]+)"/.exec(seen)?.[1];
    if (url) {
      void drain(reader);
      return url;
    }
  }
}

async function drain(reader: { read(): Promise<{ done: boolean }> }): Promise<void> {
  while (!(await reader.read()).done);
}

// On a terminal one redrawn line; elsewhere a line per status, phase or tenth of the steps.
async function follow(jobUrl: string): Promise<any> {
  let last = "";
  for (;;) {
    const job = (await (await fetch(jobUrl)).json()) as any;
    const line = `${job.status.padEnd(9)} ${job.phase.padEnd(8)} ${bar(job.step, job.total_steps)} ${job.step}/${job.total_steps ?? "?"} loss=${job.loss?.toFixed(4) ?? "-"} eta=${job.eta_s ?? "-"}s`;
    const key = process.stdout.isTTY ? line : `${job.status} ${job.phase} ${job.total_steps ? Math.floor((job.step / job.total_steps) * 10) : 0}`;
    if (key !== last) process.stdout.write(process.stdout.isTTY ? `\r${line}` : `${line}\n`);
    last = key;
    if (!["starting", "training"].includes(job.status)) {
      if (process.stdout.isTTY) process.stdout.write("\n");
      return job;
    }
    await Bun.sleep(250);
  }
}

function bar(step: number, total: number | null): string {
  const width = 30;
  const filled = total ? Math.round((step / total) * width) : 0;
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}]`;
}

// The worker reads a base model's header and refuses anything but an SDXL checkpoint; the simulator loads
// nothing. So: one tiny tensor under each of the four prefixes an SDXL checkpoint has.
function sdxlPlaceholder(): Uint8Array[] {
  const names = ["model.diffusion_model.out.2.bias", "conditioner.embedders.0.transformer.text_model.final_layer_norm.weight", "conditioner.embedders.1.model.logit_scale", "first_stage_model.quant_conv.bias"];
  return safetensorsParts(names.map((name) => ({ name, dtype: "F16" as const, shape: [2], data: new Uint8Array(4) })), { "modelspec.architecture": "lora-worker demo placeholder" });
}
