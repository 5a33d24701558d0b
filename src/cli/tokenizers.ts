import { configFileOf, creatableError, loadConfig } from "../config/load.ts";
import { fail, ok, type Result } from "../result.ts";
import { importTokenizers } from "../tokenizers/import.ts";
import { writeCarriedTokenizers } from "../tokenizers/write.ts";
import { TOKENIZERS, tokenizerDir, tokenizersProblems } from "../tokenizers/layout.ts";
import { didYouMean } from "../suggest.ts";
import { parseArgs, UsageError } from "./args.ts";
import { EXIT_CONFIG } from "./start.ts";
import { printable } from "../printable.ts";

const EXIT_PROBLEM = 1;
const FIX = "lora-worker tokenizers write (from the CLIP merges this program carries), or lora-worker tokenizers " +
  "import PATH (a Hugging Face cache, or folders in --tokenizer_cache_dir's layout)";
const TEMPLATE = "`lora-worker config template` gives each key's meaning and default";

// `lora-worker tokenizers write` or `import PATH` fills trainer.tokenizer_dir; `tokenizers check` says whether it is
// ready.
// `actions`: the words the command table gives its forms, for a mistyped one's guess.
export async function tokenizersCommand(argv: string[], actions: readonly string[]): Promise<number> {
  const [action, ...rest] = argv;
  const { positional, values } = parseArgs(rest, { values: ["config"] });
  const wanted = action === "import" ? 1 : 0;
  if (action === undefined || !actions.includes(action) || positional.length !== wanted) {
    const got = action === undefined ? "" : `, got ${argv.join(" ")}${didYouMean(action, actions)}`;
    throw new UsageError(`tokenizers takes \`write\`, \`import PATH\` or \`check\`${got}`);
  }
  const dir = await whereTokenizersGo(values.config);
  if (!dir.ok) {
    process.stderr.write(printable(dir.error));
    return EXIT_CONFIG;
  }
  if (action === "write") return writeInto(dir.value);
  return action === "import" ? importInto(positional[0]!, dir.value) : check(dir.value);
}

// These commands start nothing and need only where the tokenizers go, so the trainer's paths are not asked for: they
// run before `trainer install` has made them. A fault in the config is named, key by key, with its fix.
async function whereTokenizersGo(path: string | undefined): Promise<Result<string>> {
  const source = { path, env: process.env, hostPaths: false };
  const { file } = configFileOf(source);
  const loaded = await loadConfig(source);
  if (!loaded.ok) return fail(refusal(file, loaded.error, keysFix(file, loaded.error)));
  const { config } = loaded.value;
  const set = config.trainer.tokenizer_dir;
  const [key, value] = set === undefined ? ["state_dir", config.state_dir] : ["trainer.tokenizer_dir", set];
  const fault = creatableError(key, value);
  if (fault === null) return ok(tokenizerDir(config));
  const fix = set === undefined
    ? `set state_dir in ${file} to the worker's state folder, or trainer.tokenizer_dir to a folder for the tokenizers`
    : `set trainer.tokenizer_dir in ${file} to a folder for the tokenizers, or leave it out for <state_dir>/tokenizers`;
  return fail(refusal(file, [fault], `${fix} (its parent must exist)`));
}

function refusal(file: string, faults: string[], fix: string): string {
  return `${listed(`tokenizers: the config ${file} is invalid:`, faults)}fix: ${fix}\n`;
}

// Each fault begins with the key or environment variable it is about, where it is about one.
function keysFix(file: string, faults: string[]): string {
  const named = faults.flatMap((f) => /^([A-Za-z_][\w.[\]]*): /.exec(f)?.[1] ?? []);
  const where = (name: string) =>
    (name.startsWith("LORA_WORKER_") ? `${name} in the environment` : `${name} in ${file}`);
  if (named.length === 0) return `make ${file} the worker's config, valid TOML (${TEMPLATE})`;
  return `correct ${[...new Set(named)].map(where).join(", ")} (${TEMPLATE})`;
}

// One problem on the heading's line; several, one a line under it.
function listed(heading: string, problems: readonly string[]): string {
  if (problems.length === 1) return `${heading} ${problems[0]}\n`;
  return `${heading}\n${problems.map((p) => `  - ${p}\n`).join("")}`;
}

function importInto(source: string, dir: string): number {
  const result = importTokenizers(source, dir);
  if (!result.ok) {
    process.stderr.write(printable(listed(`tokenizers: nothing imported into ${dir}:`, result.error)));
    return EXIT_PROBLEM;
  }
  for (const t of result.value) process.stdout.write(`imported ${t.id}: ${t.from} -> ${t.to}\n`);
  return 0;
}

function writeInto(dir: string): number {
  const result = writeCarriedTokenizers(dir);
  if (!result.ok) {
    process.stderr.write(printable(listed(`tokenizers: nothing written into ${dir}:`, result.error)));
    return EXIT_PROBLEM;
  }
  for (const { spec, to, did, why } of result.value) {
    const line = did === "ready"
      ? `left ${spec.id} as it is: ${to} is ready`
      : did === "written"
        ? `wrote ${spec.id}: ${to}`
        : `replaced ${spec.id}: ${to}, which was not ready (${why.join("; ")})`;
    process.stdout.write(printable(`${line}\n`));
  }
  return check(dir);
}

function check(dir: string): number {
  const problems = tokenizersProblems(dir);
  if (problems.length === 0) {
    process.stdout.write(`tokenizers ready in ${dir}: ${TOKENIZERS.map((t) => t.id).join(", ")}\n`);
    return 0;
  }
  const listed = problems.map((p) => `  - ${p}\n`).join("");
  process.stderr.write(printable(`tokenizers not ready in ${dir}:\n${listed}fix: ${FIX}\n`));
  return EXIT_PROBLEM;
}
