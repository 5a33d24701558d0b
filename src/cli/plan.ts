import { basename, join } from "node:path";
import type { Config } from "../config/schema.ts";
import { captionsOf, planCaptions } from "../dataset/caption-plan.ts";
import { captionTokens } from "../dataset/clip-tokens.ts";
import type { TokenWindow } from "../job.ts";
import { formatFor } from "../logger.ts";
import { buildLaunch } from "../recipe/command.ts";
import { type CheckedTrain, checkTrain } from "../request/check.ts";
import { isImage } from "../request/dataset.ts";
import { MAX_JSON_DEPTH, scanJsonText } from "../request/json-text.ts";
import { type DetailItem, listed } from "../request/schema.ts";
import { TOKENIZERS, tokenizerDir } from "../tokenizers/layout.ts";
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
    const answer =
      error.kind === "invalid" ? { detail: listed(error.detail) } : { detail: error.detail, reason: error.kind };
    process.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    return 1;
  }
  const { config } = loaded;
  const gpu = createBackends(config, shimCommand(), process.env).chosen.launch(checked.value.device);
  const paths = jobDir(config.state_dir, PLAN_JOB_ID);
  const window = await datasetWindow(checked.value, config);
  const plan = buildLaunch(checked.value, config, paths, chooseTrainer(config), gpu, window);
  process.stdout.write(`${JSON.stringify(plan, null, 2)}\n`);
  return 0;
}

// The context a job would train on, chosen from arbo's captions as its preparation will choose it from the copy's
// (read here, never written: a caption that is not UTF-8 reads as the job's preparation would refuse it).
async function datasetWindow(train: CheckedTrain, config: Config): Promise<TokenWindow> {
  const paths = new Map(train.dataset.files.map((file) => [basename(file.rel), file.real]));
  const { captions } = captionsOf([...paths.keys()].filter(isImage), new Set(paths.keys()));
  const files = await Promise.all(
    captions.map(async (name) => ({ name, shown: name, text: await Bun.file(paths.get(name)!).text() })),
  );
  const { count } = captionTokens(join(tokenizerDir(config), TOKENIZERS[0]!.folder));
  const lead = { trigger: train.request.trigger, subjectClass: train.request.subject_class, count };
  return planCaptions(files, lead).window;
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
