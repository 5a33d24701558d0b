import { formatFor } from "../logger.ts";
import { buildLaunch } from "../recipe/command.ts";
import { checkTrain } from "../request/check.ts";
import { MAX_JSON_DEPTH, scanJsonText } from "../request/json-text.ts";
import type { DetailItem } from "../request/schema.ts";
import { createBackends } from "../supervisor/index.ts";
import { jobDir } from "../job-dir/job-dir.ts";
import { UsageError, parseArgs } from "./args.ts";
import { chooseTrainer, shimCommand } from "./executables.ts";
import { loadConfigOrExit } from "./start.ts";

// The job id in a plan is the literal "plan": the real one is drawn at dispatch.
const PLAN_JOB_ID = "plan";

export async function planCommand(argv: string[]): Promise<number> {
  const { positional, values } = parseArgs(argv, { values: ["config"] });
  if (positional.length !== 1) throw new UsageError("plan takes exactly one REQUEST.json");
  const loaded = await loadConfigOrExit(values.config, formatFor(2, process.env.JOURNAL_STREAM));
  const { body, faults } = await readRequest(positional[0]!);
  const checked = await checkTrain(body, loaded.config, faults);
  if (!checked.ok) {
    const { error } = checked;
    const answer = error.kind === "invalid" ? { detail: error.detail } : { detail: error.detail, reason: error.kind };
    process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    return 1;
  }
  const { config } = loaded;
  const gpu = createBackends(config, shimCommand(), process.env).chosen.launch(checked.value.device);
  const paths = jobDir(config.state_dir, PLAN_JOB_ID);
  const plan = buildLaunch(checked.value, config, paths, chooseTrainer(config), gpu);
  process.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
  return 0;
}

// Read as the worker reads a body: what only the text shows (`10.0`, a repeated key) is a fault here too.
async function readRequest(path: string): Promise<{ body: unknown; faults: DetailItem[] }> {
  const text = await Bun.file(path).text().catch(() => {
    throw new UsageError(`cannot read ${path}`);
  });
  const scan = scanJsonText(text);
  if (scan.tooDeep) throw new UsageError(`${path} nests deeper than ${MAX_JSON_DEPTH} levels`);
  try {
    return { body: JSON.parse(text), faults: scan.faults };
  } catch (err) {
    throw new UsageError(`${path} is not valid JSON: ${(err as Error).message}`);
  }
}
