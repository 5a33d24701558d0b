// `bun run real-trainer`: real sd-scripts under the compiled worker, on this CPU. Opt-in (minutes of CPU and ~15 GiB
// of memory per run), never part of `bun test`: needs SD_SCRIPTS_DIR, an sd-scripts checkout. Each check prints one
// line; the last line is `real-trainer: N/M checks passed`, and the exit code is 0 only when all passed. What the runs
// print and write is kept under $REAL_TRAINER_DIR/recordings (test/fixtures/real/SOURCES.md says which became fixtures).
import { existsSync, mkdirSync, readFileSync, renameSync, rmdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { recordJob, recordSmoke } from "./record.ts";
import { DATASET_FOLDER, freePort, layOutHost, POLL_MS, startWorker, untilEnded, writeDataset, type Host, type Worker } from "./host.ts";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import {
  checkpointPath, ensureCheckpoint, ensureVenv, installedSdScripts, placeAdapter, writeTokenizerSource,
} from "./setup.ts";
import { CheckFailed, createChecks, mustRun, runLogged, tail } from "./steps.ts";
import { markedProcessesOf } from "../../src/os/proc.ts";
import { TIERS } from "../../src/tiers.ts";
import { saveEvery } from "../../src/recipe/samples.ts";
import { choosePrecision, cpuBf16, paceLine } from "./cpu.ts";

const REPO = join(import.meta.dir, "../..");
const BINARY = join(REPO, "dist/lora-worker");
// The requests ask for previews: a state at every 25 steps, so that each preview point has its LoRA.
const FIRST_STATE = saveEvery(TIERS.fast, true);
// Below what loading SDXL needs (the U-Net alone is 10 GB in fp32): the kernel kills the trainer while it loads.
const OOM_LIMIT = "6G";

const sdScripts = process.env.SD_SCRIPTS_DIR ?? "";
if (!existsSync(join(sdScripts, "sdxl_train_network.py"))) {
  console.log("real-trainer: skipped: SD_SCRIPTS_DIR does not name an sd-scripts checkout (see docs/development.md, \"Against the real trainer\")");
  process.exit(0);
}
const work = process.env.REAL_TRAINER_DIR ?? "/var/tmp/lora-worker-real";
const logs = join(work, "logs");
const recordings = join(work, "recordings");
for (const dir of [logs, recordings]) mkdirSync(dir, { recursive: true });
const { check, lines } = createChecks((line) => console.log(line));
{
  const { model, flags } = cpuBf16();
  const bf16 = flags.length > 0 ? `bf16 in hardware (${flags.join(", ")})` : "bf16 emulated (no bf16 flag)";
  console.log(`real-trainer: ${model}, ${navigator.hardwareConcurrency} cores, ${bf16}; each run's pace follows it`);
}

const model = checkpointPath(work);
const tokenizerSource = join(work, "tokenizer-source");
await check("build", async () => tail(await mustRun(["bun", "run", "build"], join(logs, "build.log"), { cwd: REPO }), 1));
await check("venv", () => ensureVenv(work, sdScripts, BINARY));
const adapter = placeAdapter(work);
await check("cpu: bf16, and the precision cpu-accelerate trains in", () =>
  choosePrecision(join(work, "venv", "bin", "python"), adapter, logs));
// From here on the worker and the harness use the tree the install laid in the venv, as an operator's would.
const trainerSdScripts = installedSdScripts(work);
await check("checkpoint", () => ensureCheckpoint(work, trainerSdScripts));
await check("tokenizer source", () => writeTokenizerSource(work, tokenizerSource));

const host = layOutHost(work, trainerSdScripts, adapter, model, freePort());
const jobLog = (id: string) => join(host.state, "jobs", id, "train.log");
const cli = (args: string[], log: string) => runLogged([BINARY, ...args], join(logs, log));

// `trainer check` on the installed environment: sd-scripts' own parser and schema take every launch, the
// packages are the lock's, torch imports and AdamW8bit steps (on the CPU); the cuda line is this host's own
// (no GPU here, while the fake nvidia-smi lists two), so it is not required.
await check("trainer check", async () => {
  const run = await cli(["trainer", "check", "--config", host.config, "--user", "root", "--group", "root"], "trainer-check.log");
  const wanted = ["accelerate", "torch", "bitsandbytes", "sd-scripts", "sd-scripts argv", "python packages", "likeness"];
  const lineOf = (name: string) => run.output.split("\n").find((l) => l.slice(5).startsWith(`${name}: `));
  const notOk = wanted.filter((name) => !lineOf(name)?.startsWith("OK"));
  if (notOk.length > 0) throw new CheckFailed(notOk.map((name) => lineOf(name) ?? `(no ${name} line)`).join(" | "));
  return `${wanted.length} lines OK; ${lineOf("sd-scripts argv")!.slice(0, 100)}…`;
});

await check("tokenizers import", async () => {
  const run = await cli(["tokenizers", "import", "--config", host.config, tokenizerSource], "tokenizers-import.log");
  if (run.exitCode !== 0) throw new CheckFailed(`exit ${run.exitCode}: ${tail(run.output)}`);
  return tail(run.output, 2);
});

await check("doctor tokenizers", async () => {
  const line = async () => {
    const run = await cli(["doctor", "--config", host.config, "--user", "root", "--group", "root"], "doctor.log");
    return run.output.split("\n").find((l) => / tokenizers: /.test(l)) ?? "(no tokenizers line)";
  };
  const ready = await line();
  if (!ready.startsWith("OK")) throw new CheckFailed(ready);
  const dir = join(host.state, "tokenizers");
  renameSync(dir, `${dir}.away`);
  const missing = await line().finally(() => renameSync(`${dir}.away`, dir));
  if (!missing.startsWith("FAIL") || !missing.includes("fix: lora-worker tokenizers write")) {
    throw new CheckFailed(`without the tokenizers doctor said: ${missing}`);
  }
  return `${ready} | contrast: ${missing.slice(0, 100)}…`;
});

let worker: Worker = await startWorker(BINARY, host.config, join(logs, "worker-1.log"));

await check("smoke", async () => {
  const run = await cli(["smoke", "--url", worker.url], "smoke.log");
  recordSmoke(run.output, host, recordings);
  for (const line of run.output.trimEnd().split("\n")) console.log(`       ${line}`);
  if (run.exitCode !== 0) throw new CheckFailed(`lora-worker smoke exited ${run.exitCode}`);
  const ids = [...new Set(run.output.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? [])];
  // The resumed run's record: its likeness points, its verdict and its dataset's identity.
  if (ids[1] !== undefined) recordJob(host, (await worker.json(`/train/${ids[1]}`)).body, recordings, "smoke-resumed");
  return `every stage passed; ${paceLine(ids.map(jobLog))}; ${await longContext(ids[0] ?? "")}; ${noFace(run.output)}`;
});

// Random weights draw no face: the smoke dataset's two photos of one face give the run an identity, and its
// previews are not_scored for want of a face, as the record says and smoke's likeness line.
function noFace(output: string): string {
  const line = output.split("\n").find((l) => l.startsWith("PASS likeness")) ?? "(no likeness line)";
  if (!line.includes("not_scored: no face in previews") || !line.includes("2 photos with one face")) {
    throw new CheckFailed(`smoke's likeness: ${line}`);
  }
  return line.replace(/^PASS likeness +\S+ +/, "likeness ");
}

// The smoke dataset's one caption of about 100 tokens: its first run chose the 150-token context, and sd-scripts
// trained on it (its own header of the LoRA at the run's first state says so).
async function longContext(id: string): Promise<string> {
  const { body } = await worker.json(`/train/${id}`);
  const window = body.dataset?.prepared?.token_window;
  if (window?.tokens !== 150) throw new CheckFailed(`the smoke run's record says ${JSON.stringify(window)}`);
  const lora = join(host.state, "jobs", id, "run", "smoke-step00000002.safetensors");
  const verdict = await verifySafetensors(lora);
  if (!verdict.ok) throw new CheckFailed(`${lora}: ${verdict.error.detail}`);
  const said = verdict.value.metadata.ss_max_token_length;
  if (said !== "150") throw new CheckFailed(`the smoke LoRA's header says ss_max_token_length ${said}`);
  return `the long caption (${window.longest.tokens} tokens) trained on 150: record and ss_max_token_length agree`;
}

const post = (path: string, body: unknown) =>
  worker.json(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
// A fast request of its own dataset (written now unless one is given) and output.
const request = async (name: string, dataset?: string) => ({
  dataset_dir: dataset ?? (await writeDataset(host, name)),
  base_model_path: model,
  output_dir: join(host.handoff, name, "out"),
  output_name: name,
  trigger: "ohwx",
  subject_class: "person",
  repeats: 1,
  tier: "fast",
  device_index: 0,
  seed: 42,
  samples: 1,
});

// A fast job that is to fail with `code`: its record and log are kept under `name`; `lines` of its error are shown.
async function failsWith(name: string, code: string, lines: number): Promise<string> {
  const { status, body } = await post("/train", await request(name));
  if (status !== 200) throw new CheckFailed(`POST /train answered ${status}: ${JSON.stringify(body)}`);
  const ended = await untilEnded(worker, body.worker_job_id);
  recordJob(host, ended, recordings, name);
  if (ended.error_code !== code) throw new CheckFailed(`ended ${ended.error_code}: ${ended.error}`);
  return `job ${ended.worker_job_id}: ${ended.error.split("\n").slice(0, lines).join(" / ")}`;
}

let paused: any = null;
await check(`fast: pause at the first state (step ${FIRST_STATE})`, async () => {
  const { status, body } = await post("/train", await request("fast"));
  if (status !== 200) throw new CheckFailed(`POST /train answered ${status}: ${JSON.stringify(body)}`);
  paused = (await post(`/train/${body.worker_job_id}/pause`, {})).body;
  recordJob(host, paused, recordings, "fast-paused");
  if (!paused.paused || paused.resume_step !== FIRST_STATE) {
    throw new CheckFailed(`job ${paused.worker_job_id} ended ${paused.status} at step ${paused.step}: ${paused.error ?? ""}`);
  }
  return `job ${paused.worker_job_id} paused, resume_step ${paused.resume_step}; ${paceLine([jobLog(paused.worker_job_id)])}`;
});

await check("fast: the trigger reached each caption that lacked it, the phone photo trained upright, the LoRA names both", async () => {
  if (paused === null) throw new CheckFailed("no paused job to read");
  const prepared = paused.dataset?.prepared;
  const captions = prepared?.captions;
  const turned = `${DATASET_FOLDER}/phone.jpg`;
  if (captions?.trigger_added !== 3 || captions.trigger_present !== 1 || captions.images_without_caption !== 1 ||
    JSON.stringify(prepared.turned_upright) !== JSON.stringify([turned]) || prepared.token_window?.tokens !== 75) {
    throw new CheckFailed(`the record says ${JSON.stringify(prepared)}`);
  }
  // What sd-scripts itself trained on: the caption tags of the intermediate LoRA at the first state.
  const lora = join(host.state, "jobs", paused.worker_job_id, "run", `fast-step${String(FIRST_STATE).padStart(8, "0")}.safetensors`);
  const verdict = await verifySafetensors(lora);
  if (!verdict.ok) throw new CheckFailed(`${lora}: ${verdict.error.detail}`);
  const meta = verdict.value.metadata;
  const tags = JSON.parse(meta.ss_tag_frequency ?? "{}")[DATASET_FOLDER] ?? {};
  // Three captions led by "ohwx person", and the uncaptioned photo trained on the class tokens "ohwx person". The
  // captions are short: no --max_token_length, which sd-scripts writes into the header as str(None).
  const named = { trigger_phrase: meta["modelspec.trigger_phrase"], title: meta["modelspec.title"], max_token_length: meta.ss_max_token_length };
  if (tags["ohwx person"] !== 4 || tags.ohwx !== 1 || tags["smoke person"] !== 3) {
    throw new CheckFailed(`ss_tag_frequency: ${JSON.stringify(tags)}`);
  }
  if (JSON.stringify(named) !== JSON.stringify({ trigger_phrase: "ohwx", title: "fast", max_token_length: "None" })) {
    throw new CheckFailed(`the LoRA's header: ${JSON.stringify(named)}`);
  }
  return `${JSON.stringify(captions)}; turned ${turned}; ss_tag_frequency ${JSON.stringify(tags)}; ${JSON.stringify(named)}`;
});

await check(`fast: resume to the next state (step ${2 * FIRST_STATE}), then cancel`, async () => {
  if (paused === null) throw new CheckFailed("no paused job to resume");
  const resumed = await post(`/train/${paused.worker_job_id}/resume`, {});
  if (resumed.status !== 200) throw new CheckFailed(`resume answered ${resumed.status}: ${JSON.stringify(resumed.body)}`);
  const id = resumed.body.worker_job_id;
  for (;;) {
    const { body } = await worker.json(`/train/${id}`);
    if (body.resume_step === 2 * FIRST_STATE) break;
    if (!["starting", "training"].includes(body.status)) throw new CheckFailed(`job ${id} ended ${body.status}: ${body.error}`);
    await Bun.sleep(POLL_MS);
  }
  const cancelled = (await post(`/train/${id}/cancel`, {})).body;
  recordJob(host, cancelled, recordings, "fast-resumed-cancelled");
  const left = markedProcessesOf(id);
  if (cancelled.status !== "cancelled" || left.length > 0) {
    throw new CheckFailed(`job ${id} is ${cancelled.status}, processes of its tree left: ${left.join(", ") || "none"}`);
  }
  return `job ${id} from step ${resumed.body.resume_step} to its state at ${cancelled.resume_step}, cancelled, ` +
    `no process left; ${paceLine([jobLog(id)])}`;
});

await check("missing tokenizer: tokenizer_missing", async () => {
  const dir = join(host.state, "tokenizers");
  renameSync(dir, `${dir}.away`);
  try {
    return await failsWith("no-tokenizer", "tokenizer_missing", 1);
  } finally {
    renameSync(`${dir}.away`, dir);
  }
});

await check("empty dataset: refused before the spawn, and real sd-scripts' own words", async () => {
  const odd = join(host.handoff, "odd", "dataset");
  mkdirSync(odd, { recursive: true });
  await writeDataset(host, "odd-source");
  renameSync(join(host.handoff, "odd-source", "dataset", "1_ohwx person", "smoke-0.png"), join(odd, "a.Png"));
  const { status, body } = await post("/train", await request("odd", odd));
  if (status !== 422 || body.detail?.[0]?.type !== "dataset_empty") {
    throw new CheckFailed(`POST /train of a dataset of only a.Png answered ${status}: ${JSON.stringify(body)}`);
  }
  const said = await noDataFound(host, odd);
  return `422 dataset_empty; sd-scripts itself on that folder: ${said}`;
});

// A run a failed check left behind would be adopted by the next worker and hold its slot.
const active = await worker.json("/healthz").then(({ body }) => body.active_job_id, () => null);
if (active) await post(`/train/${active}/cancel`, {});
await worker.stop();
// The cgroup's processes are gone once its last run ended: cgroupfs removes a directory only then.
const removeCgroup = (dir: string) => {
  try {
    rmdirSync(dir);
  } catch (err) {
    console.log(`       could not remove ${dir}: ${(err as Error).message}`);
  }
};
await check(`host OOM kill (memory cgroup of ${OOM_LIMIT}): host_oom_killed`, async () => {
  const cgroup = memoryCgroup("lora-worker-real-trainer", OOM_LIMIT);
  worker = await startWorker(BINARY, host.config, join(logs, "worker-oom.log"), cgroup);
  try {
    return await failsWith("oom-killed", "host_oom_killed", 2);
  } finally {
    await worker.stop();
    removeCgroup(cgroup);
  }
});

const passed = lines.filter((l) => l.ok).length;
console.log(`real-trainer: ${passed}/${lines.length} checks passed (recordings in ${recordings})`);
process.exit(passed === lines.length ? 0 : 1);

// A memory cgroup of `limit` for the worker and what it starts: cgroup v2's memory.max where the unified hierarchy
// has the memory controller, else v1's memory.limit_in_bytes.
function memoryCgroup(name: string, limit: string): string {
  const v2 = existsSync("/sys/fs/cgroup/cgroup.controllers") &&
    readFileSync("/sys/fs/cgroup/cgroup.controllers", "utf8").split(/\s+/).includes("memory");
  const dir = v2 ? join("/sys/fs/cgroup", name) : join("/sys/fs/cgroup/memory", name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, v2 ? "memory.max" : "memory.limit_in_bytes"), limit);
  return dir;
}

// The plan of a valid request, pointed at `dataset` and run outside the worker: what sd-scripts says of it.
async function noDataFound(host: Host, dataset: string): Promise<string> {
  const requestFile = join(host.dir, "odd-request.json");
  // No previews: the plan writes no prompts file for the flags to name.
  writeFileSync(requestFile, JSON.stringify({ ...(await request("odd-plan")), samples: 0 }));
  const planned = await runLogged([BINARY, "plan", "--config", host.config, requestFile], join(logs, "odd-plan.log"));
  const plan = JSON.parse(planned.output);
  const toml = join(host.dir, "odd-dataset.toml");
  writeFileSync(toml, plan.dataset_toml.replace(/image_dir = "[^"]*"/, `image_dir = ${JSON.stringify(dataset)}`));
  mkdirSync(join(host.state, "jobs", "plan", "tmp"), { recursive: true });
  const argv = plan.argv.map((a: string) => (a.startsWith("--dataset_config=") ? `--dataset_config=${toml}` : a));
  const log = join(recordings, "no-data-found.log");
  rmSync(log, { force: true });
  const run = await runLogged(argv, log, { cwd: plan.cwd, env: plan.env });
  if (run.exitCode !== 0 || !run.output.includes("No data found.")) {
    throw new CheckFailed(`sd-scripts exited ${run.exitCode} without "No data found.": ${tail(run.output)}`);
  }
  return "\"No data found.\", exit 0";
}
