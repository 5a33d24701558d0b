import { dirname, join } from "node:path";
import type { Config } from "../config/schema.ts";
import { fail, ok, warn, type CheckResult } from "./check-result.ts";
import { holdsFor, type RunAs, type ServiceAccount } from "./service-account.ts";

const ACCELERATE_TIMEOUT_MS = 60_000;
export const SIMULATE_SKIP = 'trainer.mode is "simulate": not checked, no real training runs';

/** Runs `accelerate --help` as the service user: proves the venv's interpreter and packages load for it. */
export async function checkAccelerate(config: Config, account: ServiceAccount, runAs: RunAs): Promise<CheckResult> {
  const name = "accelerate";
  if (config.trainer.mode === "simulate") return warn(name, SIMULATE_SKIP);
  const accelerate = config.trainer.accelerate;
  const res = await runAs([accelerate, "--help"], {
    env: { PATH: `${dirname(accelerate)}:/usr/local/bin:/usr/bin:/bin`, HOME: config.state_dir },
    timeoutMs: ACCELERATE_TIMEOUT_MS,
  });
  if (res.exitCode === 0) return ok(name, `${accelerate} runs as ${account.user}`);
  const why = res.timedOut ? `timed out after ${ACCELERATE_TIMEOUT_MS / 1000} s` : `exit ${res.exitCode ?? "by signal"}: ${lastLine(res.output)}`;
  return fail(
    name,
    `${accelerate} does not run as ${account.user} (${why})`,
    `set trainer.accelerate to the venv's accelerate and make the venv readable and executable by ${account.user}`,
  );
}

export async function checkSdScripts(config: Config, account: ServiceAccount, runAs: RunAs): Promise<CheckResult> {
  const name = "sd-scripts";
  if (config.trainer.mode === "simulate") return warn(name, SIMULATE_SKIP);
  const script = join(config.trainer.sd_scripts_dir, "sdxl_train_network.py");
  if (await holdsFor(runAs, ["-f", script, "-a", "-r", script])) return ok(name, `${script} is readable by ${account.user}`);
  if (!(await holdsFor(runAs, ["-f", script]))) {
    return fail(name, `${script} does not exist (or ${account.user} cannot reach it)`, "set trainer.sd_scripts_dir to the sd-scripts checkout");
  }
  return fail(name, `${script} is not readable by ${account.user}`, `chmod o+r, or give ${account.user} group read on it`);
}

function lastLine(output: string): string {
  return output.split("\n").filter((l) => l.trim() !== "").at(-1) ?? "no output";
}
