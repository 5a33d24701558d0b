// Whether the environment the config names trains the worker's jobs, asked of it before any job: its sd-scripts
// takes every argv the worker would launch (sd-scripts-argv.py, with the worker's own recipe building them), and
// its packages are the lock's.
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { z } from "zod";
import { TRAIN_SCRIPT, type Config } from "../config/schema.ts";
import { jobDir } from "../job-dir/job-dir.ts";
import { BASE_PATH, buildLaunch, type ResumeFrom } from "../recipe/command.ts";
import { resumeRepeatsScale } from "../recipe/dataset-toml.ts";
import type { CheckedTrain } from "../request/check.ts";
import { MAX_SAMPLES } from "../request/schema.ts";
import { RUN_TIERS, TIERS, type RunTier } from "../tiers.ts";
import { ONE_WINDOW, TOKEN_WINDOWS, type TokenWindow } from "../job.ts";
import { LOCK_DIGEST, normalName, PYTHON_LOCK } from "../trainer/lock.ts";
import { PROVEN_SHORT } from "../trainer/sd-scripts-tree.ts";
import { describeTrainer } from "../trainer/trainer.ts";
import { failed, passed, warned, type DoctorCheck, type DoctorDeps } from "./doctor.ts";
import ARGV_PROGRAM from "./sd-scripts-argv.py" with { type: "text" };
import { parseJson, REPORT_MARK, whyStopped } from "./trainer-checks.ts";

// Importing sd-scripts imports torch, diffusers and transformers: seconds when warm, tens of seconds when cold.
const ARGV_DEADLINE_MS = 180_000;
const INSTALL_FIX = "build the trainer's environment with `lora-worker trainer bundle` and `trainer install` " +
  "(docs/trainer-environment.md), or point trainer.accelerate and trainer.sd_scripts_dir at one that has it";

/** One launch the check asks sd-scripts about. */
interface Case {
  name: string;
  tier: RunTier;
  samples: boolean;
  resumed: boolean;
  // The caption context the dataset asks for: ONE_WINDOW launches without --max_token_length.
  window: TokenWindow;
  argv: string[];
  dataset_config: string;
}

const CaseReport = z.object({
  stage: z.literal("case"),
  name: z.string(),
  unknown: z.array(z.string()),
  error: z.string().nullable(),
  dataset_error: z.string().nullable(),
});
const ImportReport = z.object({ stage: z.literal("import"), error: z.string().nullable() });
type CaseReport = z.infer<typeof CaseReport>;

// A job as the worker would run it: every part the recipe reads, paths where the config puts them (sd-scripts'
// parser and schema never open them).
function sampleTrain(config: Config, tier: RunTier, samples: boolean): CheckedTrain {
  const device = config.devices[0]!;
  const models = config.model_roots[0] ?? config.state_dir;
  const output = join(config.handoff_root, "trainer-check");
  return {
    request: {
      dataset_dir: join(config.handoff_root, "dataset"), base_model_path: join(models, "base.safetensors"),
      output_dir: output, output_name: "trainer-check", trigger: "ohwx", subject_class: "person", repeats: 10,
      tier, device_index: device.index, seed: 1, ...(samples ? { samples: MAX_SAMPLES } : {}),
    },
    device,
    datasetDir: join(config.handoff_root, "dataset"),
    dataset: { folder: "10_ohwx person", files: [], bytes: 0 },
    baseModel: join(models, "base.safetensors"),
    outputDir: output,
    outputFile: join(output, "trainer-check.safetensors"),
    resumed: false,
  };
}

/** Every tier, with samples and without, fresh and as a resume, in every caption context: the argv after the script
 * and its dataset TOML. */
export function launchCases(config: Config, dir: string): Case[] {
  const trainer = describeTrainer(config, []);
  const script = join(config.trainer.sd_scripts_dir, TRAIN_SCRIPT);
  const paths = jobDir(config.state_dir, "trainer-check");
  const shapes = RUN_TIERS.flatMap((tier) => [false, true].flatMap((samples) =>
    [false, true].flatMap((resumed) => TOKEN_WINDOWS.map((window) => ({ tier, samples, resumed, window })))));
  return shapes.map(({ tier, samples, resumed, window }) => {
    const { maxTrainSteps, checkpointEvery, batchSize } = TIERS[tier];
    const resume: ResumeFrom | null = resumed
      ? {
        state: join(paths.run, `trainer-check-step${String(checkpointEvery).padStart(8, "0")}-state`),
        step: checkpointEvery,
        repeatsScale: resumeRepeatsScale(4, 10, batchSize, maxTrainSteps),
      }
      : null;
    const launch = buildLaunch(sampleTrain(config, tier, samples), config, paths, trainer, { env: {} }, window, resume);
    const context = window === ONE_WINDOW ? "" : ` context ${window}`;
    const name = `${tier}${samples ? " with samples" : ""}${resumed ? " resumed" : ""}${context}`;
    const dataset = join(dir, `${name.replaceAll(" ", "-")}.toml`);
    writeFileSync(dataset, launch.dataset_toml, { mode: 0o644 });
    const argv = launch.argv.slice(launch.argv.indexOf(script) + 1)
      .map((word) => word.startsWith("--dataset_config=") ? `--dataset_config=${dataset}` : word);
    return { name, tier, samples, resumed, window, argv, dataset_config: dataset };
  });
}

// Without the venv's Python there is nothing to ask: the accelerate line FAILs already, with what to do.
export const notChecked = (python: string) =>
  `not checked: there is no ${python} beside trainer.accelerate (the accelerate line says what to do)`;

/** sd-scripts' own parser and dataset schema, in the venv's Python, on every launch the worker would make. */
export async function checkSdScriptsArgv(deps: DoctorDeps): Promise<DoctorCheck> {
  const name = "sd-scripts argv";
  const { config, account, runAs } = deps;
  const python = join(dirname(config.trainer.accelerate), "python");
  if (!existsSync(python)) return warned(name, notChecked(python));
  const sdScripts = config.trainer.sd_scripts_dir;
  // Readable by the service account, which runs the check.
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-trainer-check-"));
  chmodSync(dir, 0o755);
  try {
    const cases = launchCases(config, dir);
    const asked = cases.map(({ name, argv, dataset_config }) => ({ name, argv, dataset_config }));
    const job = { sd_scripts: sdScripts, mark: REPORT_MARK, cases: asked };
    const deadlineMs = ARGV_DEADLINE_MS;
    const run = await runAs([python, "-c", ARGV_PROGRAM, JSON.stringify(job)], {
      env: { ...pythonEnv(python, config), PYTHONUNBUFFERED: "1", HF_HUB_OFFLINE: "1" },
      timeoutMs: deadlineMs,
    });
    const who = `${python} as ${account.user}`;
    const reports = run.stdout.split("\n").filter((line) => line.startsWith(REPORT_MARK))
      .map((line) => parseJson(line.slice(REPORT_MARK.length)));
    const imported = reports.map((r) => ImportReport.safeParse(r)).find((r) => r.success)?.data;
    if (imported === undefined) {
      return failed(name, `${who} did not import ${sdScripts}: ${whyStopped(run, deadlineMs)}`, INSTALL_FIX);
    }
    if (imported.error !== null) {
      return failed(name, `${who} cannot import sdxl_train_network from ${sdScripts}: ${imported.error}`, INSTALL_FIX);
    }
    const answers = new Map(reports.flatMap((r) => {
      const parsed = CaseReport.safeParse(r);
      return parsed.success ? [[parsed.data.name, parsed.data] as const] : [];
    }));
    const unanswered = cases.filter((c) => !answers.has(c.name));
    if (unanswered.length > 0) {
      const why = `${who} stopped before it answered for ${unanswered[0]!.name}: ${whyStopped(run, deadlineMs)}`;
      return failed(name, why, INSTALL_FIX);
    }
    return judgeCases(name, sdScripts, cases, answers);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function judgeCases(name: string, sdScripts: string, cases: Case[], answers: Map<string, CaseReport>): DoctorCheck {
  const problems: string[] = [];
  // One problem, the launches it was found in: each missing flag, each refusal of the parser or the schema.
  const found = new Map<string, Case[]>();
  const add = (problem: string, c: Case) => found.set(problem, [...(found.get(problem) ?? []), c]);
  for (const c of cases) {
    const { unknown, error, dataset_error: datasetError } = answers.get(c.name)!;
    for (const flag of unknown) add(`its parser has no ${flag}`, c);
    if (error !== null) add(`it refuses the arguments: ${error}`, c);
    if (datasetError !== null) add(`its config schema refuses the dataset TOML: ${datasetError}`, c);
  }
  for (const [why, where] of found) problems.push(`${why} (${whichLaunches(where, cases)})`);
  if (problems.length > 0) {
    return failed(name, `sd-scripts at ${sdScripts} would not start the worker's jobs: ${problems.join("; ")}`,
      `use sd-scripts ${PROVEN_SHORT} (lora-worker trainer bundle/install), or one whose train script has these`);
  }
  const launches = `${cases.length} launches (${RUN_TIERS.join(", ")}; with samples and without; fresh and resumed; ` +
    `captions of ${TOKEN_WINDOWS.slice(0, -1).join(", ")} and ${TOKEN_WINDOWS.at(-1)} tokens)`;
  return passed(name, `sd-scripts at ${sdScripts} takes the worker's ${launches} by its own parser, and their ` +
    "dataset TOMLs by its config schema");
}

// The launches a problem was found in, in a few words: the tiers, and with samples or resumed when only those.
function whichLaunches(where: Case[], all: Case[]): string {
  if (where.length === all.length) return `every launch: ${RUN_TIERS.join(", ")}`;
  const tiers = RUN_TIERS.filter((tier) => where.some((c) => c.tier === tier));
  const only = (pick: (c: Case) => boolean, words: string) => where.every(pick) ? ` ${words}` : "";
  return `${tiers.join(", ")}${only((c) => c.samples, "with samples")}${only((c) => !c.samples, "without samples")}` +
    `${only((c) => c.resumed, "resumed")}${only((c) => !c.resumed, "fresh")}` +
    `${only((c) => c.window !== ONE_WINDOW, "with --max_token_length")}` +
    `${only((c) => c.window === ONE_WINDOW, "without --max_token_length")}`;
}

const PACKAGES_PROGRAM = `import importlib.metadata, json
versions = {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()}
print(${JSON.stringify(REPORT_MARK)} + json.dumps(versions))
`;
const Packages = z.record(z.string(), z.string());
// runAs's own bound: listing the installed packages reads only their metadata.
const PACKAGES_DEADLINE_MS = 10_000;

const pythonEnv = (python: string, config: Config) =>
  ({ PATH: `${dirname(python)}:${BASE_PATH}`, HOME: config.state_dir });

/** The venv's packages against the lock: another version is a WARN (the argv check says whether sd-scripts runs). */
export async function checkPackages(deps: DoctorDeps): Promise<DoctorCheck> {
  const name = "python packages";
  const { config, account, runAs } = deps;
  const python = join(dirname(config.trainer.accelerate), "python");
  if (!existsSync(python)) return warned(name, notChecked(python));
  const run = await runAs([python, "-c", PACKAGES_PROGRAM], { env: pythonEnv(python, config) });
  const line = run.stdout.split("\n").find((l) => l.startsWith(REPORT_MARK));
  const parsed = Packages.safeParse(line === undefined ? null : parseJson(line.slice(REPORT_MARK.length)));
  if (!parsed.success) {
    const why = `${python} as ${account.user} did not list its packages: ${whyStopped(run, PACKAGES_DEADLINE_MS)}`;
    return failed(name, why, INSTALL_FIX);
  }
  const installed = new Map(Object.entries(parsed.data).map(([n, v]) => [normalName(n), v]));
  const other = PYTHON_LOCK.flatMap((pin) => {
    const version = installed.get(normalName(pin.name));
    if (version === pin.version) return [];
    return [`${pin.name} ${version ?? "missing"} (lock ${pin.version})`];
  });
  const lock = `the lock (${PYTHON_LOCK.length} packages, sha256 ${LOCK_DIGEST.slice(0, 12)})`;
  if (other.length === 0) return passed(name, `${python} holds ${lock} exactly`);
  const shown = other.length <= 8 ? other.join(", ") : `${other.slice(0, 8).join(", ")} and ${other.length - 8} more`;
  return warned(name, `${other.length} of ${lock} differ in ${python}: ${shown}`,
    "a venv from `lora-worker trainer install` holds the lock exactly; this one is untested with the recipe");
}
