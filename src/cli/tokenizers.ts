import { formatFor } from "../logger.ts";
import { importTokenizers } from "../tokenizers/import.ts";
import { TOKENIZERS, tokenizerDir, tokenizersProblems } from "../tokenizers/layout.ts";
import { didYouMean } from "../suggest.ts";
import { parseArgs, UsageError } from "./args.ts";
import { loadConfigOrExit } from "./start.ts";
import { printable } from "../printable.ts";

const EXIT_PROBLEM = 1;
const FIX = "lora-worker tokenizers import PATH (a Hugging Face cache, or folders in --tokenizer_cache_dir's layout)";

// `lora-worker tokenizers import PATH` fills trainer.tokenizer_dir; `tokenizers check` says whether it is ready.
export async function tokenizersCommand(argv: string[]): Promise<number> {
  const [action, ...rest] = argv;
  const { positional, values } = parseArgs(rest, { values: ["config"] });
  const wanted = action === "import" ? 1 : 0;
  if ((action !== "import" && action !== "check") || positional.length !== wanted) {
    const got = action === undefined ? "" : `, got ${argv.join(" ")}${didYouMean(action, ["import", "check"])}`;
    throw new UsageError(`tokenizers takes \`import PATH\` or \`check\`${got}`);
  }
  const { config } = await loadConfigOrExit(values.config, formatFor(2, process.env.JOURNAL_STREAM));
  const dir = tokenizerDir(config);
  return action === "import" ? importInto(positional[0]!, dir) : check(dir);
}

function importInto(source: string, dir: string): number {
  const result = importTokenizers(source, dir);
  if (!result.ok) {
    const [only, ...more] = result.error;
    const problems = more.length === 0 ? ` ${only}\n` : `\n${result.error.map((e) => `  - ${e}\n`).join("")}`;
    process.stderr.write(printable(`tokenizers: nothing imported into ${dir}:${problems}`));
    return EXIT_PROBLEM;
  }
  for (const t of result.value) process.stdout.write(`imported ${t.id}: ${t.from} -> ${t.to}\n`);
  return 0;
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
