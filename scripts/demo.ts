// The newcomer's end-to-end run: a worker with the simulated trainer on a scratch host whose photos show one real
// person, one real POST /train with previews, progress until the end, the LoRA's sha256 checked on disk, and the
// likeness report the face scorer (scripts/setup.sh's .venv-likeness) made of the previews, drawn as a chart.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { likenessRows } from "../src/cli/client/likeness-rows.ts";
import { FACE_PYTHON } from "../test/support/face-scorer.ts";
import { layOutScratchHost } from "./scratch-host.ts";

const REPO = join(import.meta.dir, "..");
const SECONDS_PER_STEP = 0.02;

const useBinary = process.argv.includes("--binary");
const root = mkdtempSync(join(tmpdir(), "lora-worker-demo-"));
const faces = { python: FACE_PYTHON };
const host = layOutScratchHost(root, { listen: "127.0.0.1:0", secondsPerStep: SECONDS_PER_STEP, faces });
const auth = { authorization: `Bearer ${readFileSync(host.tokenPath, "utf8").trim()}` };

const command = useBinary ? [join(REPO, "dist/lora-worker")] : [process.execPath, join(REPO, "src/main.ts")];
const worker = Bun.spawn([...command, "serve", "--config", host.configPath], { stdout: "pipe", stderr: "inherit" });
const url = await listeningUrl(worker.stdout);
console.log(`worker up at ${url} (${useBinary ? "compiled binary" : "from source"}), scratch host in ${root}`);

try {
  const health = await (await fetch(`${url}/healthz`)).json();
  console.log("GET /healthz", JSON.stringify(health));
  type GpuStatus = { devices: Array<{ index: number; name: string; memory_free_mib: number }> };
  const gpus = (await (await fetch(`${url}/gpu-status`, { headers: auth })).json()) as GpuStatus;
  const free = gpus.devices.map((d) => `#${d.index} ${d.name} ${d.memory_free_mib} MiB free`);
  console.log("GET /gpu-status", free.join(", "));
  const res = await fetch(`${url}/train`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify(host.request),
  });
  const dispatched = (await res.json()) as { worker_job_id: string; status: string };
  console.log(`POST /train -> ${res.status}`, JSON.stringify(dispatched));
  if (res.status !== 200) process.exit(1);
  const job = await follow(`${url}/train/${dispatched.worker_job_id}`);
  console.log("final record", JSON.stringify(job, null, 2));
  const log = await (await fetch(`${url}/train/${dispatched.worker_job_id}/log?lines=6`, { headers: auth })).text();
  console.log(`last log lines:\n${log}`);
  if (job.status !== "succeeded") throw new Error(`job ended ${job.status}`);
  const onDisk = new Bun.CryptoHasher("sha256").update(await Bun.file(job.lora_path).arrayBuffer()).digest("hex");
  if (onDisk !== job.lora_sha256) throw new Error(`sha256 mismatch: record ${job.lora_sha256}, disk ${onDisk}`);
  console.log(`OK: ${job.lora_path} (${job.lora_bytes} bytes) matches lora_sha256 ${onDisk}`);
  console.log(likenessChart(job, url).join("\n"));
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
    const job = (await (await fetch(jobUrl, { headers: auth })).json()) as any;
    const steps = `${job.step}/${job.total_steps ?? "?"}`;
    const line = `${job.status.padEnd(9)} ${job.phase.padEnd(8)} ${bar(job.step, job.total_steps)} ${steps} ` +
      `loss=${job.loss?.toFixed(4) ?? "-"} eta=${job.eta_s === null ? "-" : `${job.eta_s}s`}`;
    const tenth = job.total_steps ? Math.floor((job.step / job.total_steps) * 10) : 0;
    const key = process.stdout.isTTY ? line : `${job.status} ${job.phase} ${tenth}`;
    if (key !== last) process.stdout.write(process.stdout.isTTY ? `\r${line}` : `${line}\n`);
    last = key;
    if (!["starting", "training"].includes(job.status)) {
      if (process.stdout.isTTY) process.stdout.write("\n");
      return job;
    }
    await Bun.sleep(250);
  }
}

// Per preview point, the trigger's and the class's distance to the dataset's person as a bar, the threshold
// marked; then the verdict and the best checkpoint in lora-worker status's words. The status page draws the same.
function likenessChart(job: any, baseUrl: string): string[] {
  const report = job.likeness;
  const identity = job.dataset?.prepared?.identity;
  const lines = [`\nthe dataset's faces: ${identity?.text ?? "not scored"}`];
  if (report.points.length === 0) {
    const fix = report.reason === "scorer_missing"
      ? " (bash scripts/setup.sh builds .venv-likeness, the face scorer)"
      : "";
    return [...lines, `likeness: ${report.verdict}: ${report.reason}${fix}`];
  }
  const width = 40;
  const scale = 1.2; // distances past it are drawn full
  const mark = Math.round((report.threshold / scale) * width);
  const drawn = (d: number | null) => {
    if (d === null) return "no face";
    const cells = Math.min(width, Math.round((d / scale) * width));
    const cell = (i: number) => (i === mark ? "|" : i < cells ? "█" : " ");
    return `${Array.from({ length: width }, (_, i) => cell(i)).join("")} ${d.toFixed(2)}`;
  };
  lines.push(`likeness: distance to the dataset's person by step (| marks ${report.threshold}: a match is at most it)`);
  for (const p of report.points) {
    lines.push(`  step ${String(p.step).padStart(4)}  trigger ${drawn(p.trigger.distance)}`);
    lines.push(`             class   ${drawn(p.class.distance)}`);
  }
  for (const [label, text] of likenessRows(job, baseUrl).filter(([label]) => label === "verdict" || label === "best")) {
    lines.push(`  ${label}: ${text}`);
  }
  return lines;
}

function bar(step: number, total: number | null): string {
  const width = 30;
  const filled = total ? Math.round((step / total) * width) : 0;
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}]`;
}
