import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { z } from "zod";
import { TRAIN_SCRIPT, type Config } from "../config/schema.ts";
import { failed, INSTALL_TRAINER, passed, warned, type DoctorCheck, type DoctorDeps } from "./doctor.ts";
import { holdsFor, type RunAs, type RunResult, type ServiceAccount } from "./service-account.ts";
import { BASE_PATH } from "../recipe/command.ts";
import { createGpuProbe } from "../gpu/probe.ts";

const ACCELERATE_TIMEOUT_MS = 60_000;
// Importing torch on a cold page cache, or a first CUDA init, takes seconds; a minute is a hang.
const PYTHON_DEADLINE_MS = 60_000;

/** Runs `accelerate --help` as the service user: proves the venv's interpreter and packages load for it. */
export async function checkAccelerate(config: Config, account: ServiceAccount, runAs: RunAs): Promise<DoctorCheck> {
  const name = "accelerate";
  const accelerate = config.trainer.accelerate;
  const res = await runAs([accelerate, "--help"], {
    env: { PATH: `${dirname(accelerate)}:${BASE_PATH}`, HOME: config.state_dir },
    timeoutMs: ACCELERATE_TIMEOUT_MS,
  });
  if (res.exitCode === 0) return passed(name, `${accelerate} runs as ${account.user}`);
  const why = res.timedOut
    ? `timed out after ${ACCELERATE_TIMEOUT_MS / 1000} s`
    : `exit ${res.exitCode ?? "by signal"}: ${lastLine(res.output)}`;
  return failed(
    name,
    `${accelerate} does not run as ${account.user} (${why})`,
    `${INSTALL_TRAINER}; or set trainer.accelerate to an existing venv's accelerate, ` +
      `readable and executable by ${account.user} (docs/operating.md)`,
  );
}

export async function checkSdScripts(config: Config, account: ServiceAccount, runAs: RunAs): Promise<DoctorCheck> {
  const name = "sd-scripts";
  const script = join(config.trainer.sd_scripts_dir, TRAIN_SCRIPT);
  if (await holdsFor(runAs, ["-f", script, "-a", "-r", script])) {
    return passed(name, `${script} is readable by ${account.user}`);
  }
  if (!(await holdsFor(runAs, ["-f", script]))) {
    const missing = `${script} does not exist (or ${account.user} cannot reach it)`;
    const fix = `${INSTALL_TRAINER}; or set trainer.sd_scripts_dir to an existing sd-scripts checkout`;
    return failed(name, missing, fix);
  }
  const fix = `chmod o+r, or give ${account.user} group read on it`;
  return failed(name, `${script} is not readable by ${account.user}`, fix);
}

function lastLine(output: string): string {
  return output.split("\n").filter((l) => l.trim() !== "").at(-1) ?? "no output";
}

// The question doctor asks the trainer's interpreter, and what its answer says. The program does, in
// a run's order, what a run needs of the venv: import torch, ask it for CUDA devices, import
// bitsandbytes (AdamW8bit imports it only once the model is loaded and the latents are cached). It
// reports each stage on stdout as it passes it, so a crash or a hang shows the stage it stopped in. AdamW8bit
// takes one step on a small weight (4096 values: bitsandbytes keeps smaller ones in 32 bits), on the GPU when
// torch sees one, so its 8-bit kernels are loaded as a run loads them.

/** What the trainer's Python is asked, in a run's order, a line each. */
export const STAGES = ["torch", "cuda", "bitsandbytes"] as const;
type Stage = (typeof STAGES)[number];

export const REPORT_MARK = "lora-worker-doctor ";

const PROBE_PROGRAM = `import json
def report(stage, **facts):
    print(${JSON.stringify(REPORT_MARK)} + json.dumps(dict(stage=stage, **facts)), flush=True)
import torch
report("torch", version=torch.__version__)
available = torch.cuda.is_available()
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if available else []
report("cuda", available=available, cuda=torch.version.cuda, devices=names)
import bitsandbytes
where = "cuda:0" if available else "cpu"
weight = torch.nn.Parameter(torch.zeros(4096, device=where))
weight.grad = torch.ones_like(weight)
bitsandbytes.optim.AdamW8bit([weight], lr=1e-4).step()
version = getattr(bitsandbytes, "__version__", "unknown")
report("bitsandbytes", version=version, optimizer=f"AdamW8bit stepped on {where}")
`;

const Report = z.discriminatedUnion("stage", [
  z.object({ stage: z.literal("torch"), version: z.string() }),
  z.object({
    stage: z.literal("cuda"),
    available: z.boolean(),
    cuda: z.string().nullable(),
    devices: z.array(z.string()),
  }),
  z.object({ stage: z.literal("bitsandbytes"), version: z.string(), optimizer: z.string() }),
]);
export type Report = z.infer<typeof Report>;
type Reports = { [S in Stage]?: Extract<Report, { stage: S }> };

// Python's last word on an uncaught exception: `ImportError: …`, `torch.OutOfMemoryError: …`.
const EXCEPTION_LINE = /^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b:?/;
// Enough of a message to name the problem on one line.
const MAX_WHY_CHARS = 240;

const DOING: Record<Stage, string> = {
  torch: "import torch",
  cuda: "answer torch.cuda.is_available()",
  bitsandbytes: "import bitsandbytes and take a step of AdamW8bit (the recipe's optimizer)",
};
const FIX: Record<Stage, string> = {
  torch: `${INSTALL_TRAINER}; in an existing venv, install torch beside trainer.accelerate (the one sd-scripts ` +
    "runs in), readable by the service user",
  cuda: "install a CUDA build of torch that matches the driver (nvidia-smi shows its CUDA version), " +
    "and check /dev/nvidia-uvm",
  bitsandbytes: "install a bitsandbytes that matches this torch and CUDA in the venv: " +
    "AdamW8bit fails minutes into every run without it",
};

/** The venv's interpreter (accelerate runs sd-scripts with it) as the service user: torch, CUDA, bitsandbytes. */
export async function checkTrainerPython(deps: DoctorDeps): Promise<DoctorCheck[]> {
  const { config, account, runAs } = deps;
  const python = join(dirname(config.trainer.accelerate), "python");
  const deadlineMs = deps.pythonDeadlineMs ?? PYTHON_DEADLINE_MS;
  const run = await runAs([python, "-c", PROBE_PROGRAM], {
    env: {
      PATH: `${dirname(python)}:${BASE_PATH}`,
      HOME: config.state_dir,
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
      PYTHONUNBUFFERED: "1",
    },
    timeoutMs: deadlineMs,
  });
  const reports = readReports(run.stdout);
  const stopped = STAGES.find((stage) => reports[stage] === undefined);
  const who = `${python} as ${account.user}`;
  return Promise.all(STAGES.map(async (stage) => {
    if (stage === stopped) {
      return failed(stage, `${who} did not ${DOING[stage]}: ${whyStopped(run, deadlineMs)}`, FIX[stage]);
    }
    if (reports[stage] === undefined) return warned(stage, `not checked: ${who} stopped before it, at ${stopped}`);
    return stagePassed(stage, reports, deps, who);
  }));
}

function readReports(stdout: string): Reports {
  const reports: Reports = {};
  for (const line of stdout.split("\n")) {
    if (!line.startsWith(REPORT_MARK)) continue;
    const parsed = Report.safeParse(parseJson(line.slice(REPORT_MARK.length)));
    if (parsed.success) Object.assign(reports, { [parsed.data.stage]: parsed.data });
  }
  return reports;
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export function whyStopped(run: RunResult, deadlineMs: number): string {
  if (run.timedOut) return `no answer within ${deadlineMs / 1000} s; killed at the deadline`;
  return `exit ${run.exitCode ?? "by signal"}, ${stopReason(run)}`;
}

// Why the program stopped short: the exception it died of (with a message that runs over several
// lines joined into one), else its last line of output.
function stopReason(run: RunResult): string {
  const lines = run.stderr.split("\n");
  const at = lines.findLastIndex((line) => EXCEPTION_LINE.test(line));
  const why = at === -1
    ? lastProbeLine(run.output)
    : lines.slice(at).map((line) => line.trim()).filter((line) => line !== "").join(" ");
  return why.length > MAX_WHY_CHARS ? `${why.slice(0, MAX_WHY_CHARS - 1)}…` : why;
}

function lastProbeLine(output: string): string {
  return output.split("\n").filter((line) => line.trim() !== "" && !line.startsWith(REPORT_MARK)).at(-1) ?? "no output";
}

type Checked = Promise<DoctorCheck> | DoctorCheck;

function stagePassed(stage: Stage, reports: Reports, deps: DoctorDeps, who: string): Checked {
  if (stage === "torch") return passed(stage, `torch ${reports.torch!.version} imports in ${who}`);
  if (stage === "bitsandbytes") {
    return passed(stage, `bitsandbytes ${reports.bitsandbytes!.version} imports; ${reports.bitsandbytes!.optimizer}`);
  }
  return cudaResult(reports.cuda!, deps);
}

// With CUDA_DEVICE_ORDER=PCI_BUS_ID, as a run has it, torch's indexes are nvidia-smi's and the config's. torch
// must see every GPU nvidia-smi lists; where nvidia-smi lists none (or fails: its own line says why), there is no
// GPU to hold torch to.
async function cudaResult(cuda: NonNullable<Reports["cuda"]>, { config }: DoctorDeps): Promise<DoctorCheck> {
  const build = cuda.cuda === null ? "a torch built without CUDA" : `torch built for CUDA ${cuda.cuda}`;
  const listed = await listedGpus(config);
  if (listed.length === 0) {
    if (!cuda.available) return warned("cuda", `not checked: nvidia-smi lists no GPU (${listed.why}); ${build}`);
  } else if (!cuda.available || cuda.devices.length < listed.length) {
    const seen = cuda.available ? `${cuda.devices.length}: ${cuda.devices.join(", ") || "none"}` : "none";
    return failed("cuda", `torch sees ${seen} of the ${listed.length} GPU(s) nvidia-smi lists ` +
      `(${listed.names.join(", ")}); ${driverVersion()}, ${build}`, FIX.cuda);
  }
  const seen = cuda.devices.map((name, index) => `${index} ${name}`).join(", ");
  const missing = config.devices.filter((device) => device.index >= cuda.devices.length);
  if (missing.length > 0) {
    const names = missing.map((device) => `device ${device.index} (${device.name})`).join(", ");
    const fix = "fix [[devices]] in the config, or the driver, so that torch sees every configured index";
    return failed("cuda", `${names} not seen by torch (it sees: ${seen || "none"})`, fix);
  }
  return passed("cuda", `torch sees ${cuda.devices.length} CUDA device(s): ${seen} (${build})`);
}

// The GPUs nvidia-smi lists by name, or none with why.
async function listedGpus(config: Config): Promise<{ length: number; names: string[]; why: string }> {
  const probe = createGpuProbe({ nvidiaSmi: config.gpu.nvidia_smi, timeoutMs: config.gpu.probe_timeout_ms, ttlMs: 0 });
  const result = await probe.read({ fresh: true });
  if (!result.ok) return { length: 0, names: [], why: `${config.gpu.nvidia_smi}: ${result.error}` };
  const names = result.value.map((gpu) => `${gpu.index} ${gpu.name}`);
  return { length: names.length, names, why: "it answered with an empty list" };
}

// The loaded kernel module's version, as the driver itself reports it.
const DRIVER_VERSION_FILE = "/proc/driver/nvidia/version";

function driverVersion(): string {
  try {
    const match = /Kernel Module\s+(?:for \S+\s+)?([\d.]+)/.exec(readFileSync(DRIVER_VERSION_FILE, "utf8"));
    return match === null ? `driver version not read from ${DRIVER_VERSION_FILE}` : `driver ${match[1]}`;
  } catch {
    return `no NVIDIA driver loaded (${DRIVER_VERSION_FILE} absent)`;
  }
}
