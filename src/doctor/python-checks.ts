import { dirname, join } from "node:path";
import type { RunResult } from "./bounded-run.ts";
import { fail, ok, warn, type CheckResult } from "./check-result.ts";
import type { DoctorDeps } from "./doctor.ts";
import { PROBE_PROGRAM, readReports, STAGES, stopReason, type Reports, type Stage } from "./python-probe.ts";
import { SIMULATE_SKIP } from "./trainer-checks.ts";

/** Importing torch on a cold page cache, or a first CUDA init, takes seconds; a minute is a hang. */
export const PYTHON_DEADLINE_MS = 60_000;

const DOING: Record<Stage, string> = {
  torch: "import torch",
  cuda: "answer torch.cuda.is_available()",
  bitsandbytes: "import bitsandbytes",
};
const FIX: Record<Stage, string> = {
  torch: "install torch in the venv beside trainer.accelerate (the one sd-scripts runs in), readable by the service user",
  cuda: "install a CUDA build of torch that matches the driver (nvidia-smi shows its CUDA version), and check /dev/nvidia-uvm",
  bitsandbytes: "install a bitsandbytes that matches this torch and CUDA in the venv: AdamW8bit fails minutes into every run without it",
};

/** The venv's interpreter (accelerate runs sd-scripts with it) as the service user: torch, CUDA, bitsandbytes. */
export async function checkTrainerPython(deps: DoctorDeps): Promise<CheckResult[]> {
  const { config, account, runAs } = deps;
  if (config.trainer.mode === "simulate") return STAGES.map((stage) => warn(stage, SIMULATE_SKIP));
  const python = join(dirname(config.trainer.accelerate), "python");
  const deadlineMs = deps.pythonDeadlineMs ?? PYTHON_DEADLINE_MS;
  const run = await runAs([python, "-c", PROBE_PROGRAM], {
    env: { PATH: `${dirname(python)}:/usr/local/bin:/usr/bin:/bin`, HOME: config.state_dir, CUDA_DEVICE_ORDER: "PCI_BUS_ID", PYTHONUNBUFFERED: "1" },
    timeoutMs: deadlineMs,
  });
  const reports = readReports(run.stdout);
  const stopped = STAGES.find((stage) => reports[stage] === undefined);
  const who = `${python} as ${account.user}`;
  return STAGES.map((stage) => {
    if (stage === stopped) return fail(stage, `${who} did not ${DOING[stage]}: ${whyStopped(run, deadlineMs)}`, FIX[stage]);
    if (reports[stage] === undefined) return warn(stage, `not checked: ${who} stopped before it, at ${stopped}`);
    return passed(stage, reports, deps, who);
  });
}

function whyStopped(run: RunResult, deadlineMs: number): string {
  if (run.timedOut) return `no answer within ${deadlineMs / 1000} s; killed at the deadline`;
  return `exit ${run.exitCode ?? "by signal"}, ${stopReason(run)}`;
}

function passed(stage: Stage, reports: Reports, deps: DoctorDeps, who: string): CheckResult {
  if (stage === "torch") return ok(stage, `torch ${reports.torch!.version} imports in ${who}`);
  if (stage === "bitsandbytes") return ok(stage, `bitsandbytes ${reports.bitsandbytes!.version} imports`);
  return cudaResult(reports.cuda!, deps);
}

// With CUDA_DEVICE_ORDER=PCI_BUS_ID, as a run has it, torch's indexes are nvidia-smi's and the config's.
function cudaResult(cuda: NonNullable<Reports["cuda"]>, { config }: DoctorDeps): CheckResult {
  const build = cuda.cuda === null ? "a torch built without CUDA" : `torch built for CUDA ${cuda.cuda}`;
  if (!cuda.available) return fail("cuda", `torch.cuda.is_available() is False (${build})`, FIX.cuda);
  const seen = cuda.devices.map((name, index) => `${index} ${name}`).join(", ");
  const missing = config.devices.filter((device) => device.index >= cuda.devices.length);
  if (missing.length > 0) {
    const names = missing.map((device) => `device ${device.index} (${device.name})`).join(", ");
    return fail("cuda", `${names} not seen by torch (it sees: ${seen || "none"})`, "fix [[devices]] in the config, or the driver, so that torch sees every configured index");
  }
  return ok("cuda", `torch sees ${cuda.devices.length} CUDA device(s): ${seen} (${build})`);
}
