import { buildLaunch } from "../recipe/command.ts";
import { checkTrain } from "../request/check.ts";
import { jobPaths } from "../supervisor/job-dir.ts";
import { UsageError, parseArgs } from "./args.ts";
import { loadConfigOrExit } from "./load-or-exit.ts";
import { trainerCommand } from "./trainer-command.ts";

// The job id in a plan is the literal "plan": the real one is drawn at dispatch.
export const PLAN_JOB_ID = "plan";

export async function planCommand(argv: string[]): Promise<number> {
  const { positional, options } = parseArgs(argv, ["config"]);
  if (positional.length !== 1) throw new UsageError("plan takes exactly one REQUEST.json");
  const loaded = await loadConfigOrExit(options.config);
  const body = await readRequest(positional[0]!);
  const checked = await checkTrain(body, loaded.config);
  if (!checked.ok) {
    process.stdout.write(`${JSON.stringify(checked.kind === "invalid" ? { detail: checked.detail } : { detail: checked.detail, reason: checked.kind }, null, 2)}\n`);
    return 1;
  }
  const plan = buildLaunch(checked.value, loaded.config, jobPaths(loaded.config.state_dir, PLAN_JOB_ID), trainerCommand(loaded.config));
  process.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
  return 0;
}

async function readRequest(path: string): Promise<unknown> {
  const text = await Bun.file(path).text().catch(() => {
    throw new UsageError(`cannot read ${path}`);
  });
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}
