import { dirname, join } from "node:path";
import { z } from "zod";
import { KNOWN_CAPTIONS } from "../tokenizers/clip-vocabulary.ts";
import { TOKENIZERS, tokenizerDir, tokenizersProblems, type TokenizerSpec } from "../tokenizers/layout.ts";
import { failed, passed, type DoctorCheck, type DoctorDeps } from "./doctor.ts";
import { parseJson, REPORT_MARK, whyStopped } from "./trainer-checks.ts";
import { BASE_PATH } from "../recipe/command.ts";

const NAME = "tokenizers";
const FIX = "lora-worker tokenizers write (both, from the CLIP merges the binary carries), or tokenizers import PATH " +
  "from a Hugging Face cache that holds both (docs/operating.md, \"From a bare box to smoke\", step 5)";
// Importing transformers cold takes seconds; a minute is a hang.
const LOAD_DEADLINE_MS = 60_000;
const CONTEXT_IDS = 77;
// What transformers must make of a caption: the ids the worker's own check holds the files to.
const [CAPTION, CAPTION_IDS] = Object.entries(KNOWN_CAPTIONS)[0]!;
const EXPECTED_IDS = [49406, ...CAPTION_IDS, 49407];

// Loads each folder as sd-scripts does with --tokenizer_cache_dir (CLIPTokenizer.from_pretrained of the folder,
// tokenizer 2 padded with id 0), offline, and reports how many ids a caption becomes and the ids of a known one.
const LOAD_PROGRAM = `import json, sys
from transformers import CLIPTokenizer
for folder, pads_with_zero in json.loads(sys.argv[1]):
    tokenizer = CLIPTokenizer.from_pretrained(folder)
    if pads_with_zero:
        tokenizer.pad_token_id = 0
    ids = tokenizer("a photo of a person", max_length=${CONTEXT_IDS}, padding="max_length", truncation=True)
    caption = tokenizer(${JSON.stringify(CAPTION)})["input_ids"]
    report = dict(stage="tokenizer", folder=folder, ids=len(ids["input_ids"]), caption=caption)
    print(${JSON.stringify(REPORT_MARK)} + json.dumps(report), flush=True)
`;

const Loaded = z.object({ stage: z.literal("tokenizer"), folder: z.string(), ids: z.int(), caption: z.array(z.int()) });
type Loaded = z.infer<typeof Loaded>;

/** Both tokenizers in trainer.tokenizer_dir, whole, and loaded by the venv's Python as the service user, offline. */
export async function checkTokenizers(deps: DoctorDeps): Promise<DoctorCheck> {
  const { config, account, runAs } = deps;
  const dir = tokenizerDir(config);
  const problems = tokenizersProblems(dir);
  if (problems.length > 0) return failed(NAME, `not ready in ${dir}: ${problems.join("; ")}`, FIX);
  const python = join(dirname(config.trainer.accelerate), "python");
  const folders = TOKENIZERS.map((t) => [join(dir, t.folder), t.padsWithIdZero]);
  const deadlineMs = deps.pythonDeadlineMs ?? LOAD_DEADLINE_MS;
  const run = await runAs([python, "-c", LOAD_PROGRAM, JSON.stringify(folders)], {
    env: { PATH: `${dirname(python)}:${BASE_PATH}`, HOME: config.state_dir, HF_HUB_OFFLINE: "1" },
    timeoutMs: deadlineMs,
  });
  const loaded = readLoaded(run.stdout);
  const of = (t: TokenizerSpec) => loaded.get(join(dir, t.folder));
  const who = `${python} as ${account.user}`;
  const unloaded = TOKENIZERS.filter((t) => of(t)?.ids !== CONTEXT_IDS);
  if (unloaded.length > 0) {
    const which = unloaded.map((t) => t.id).join(" and ");
    const how = unloaded.every((t) => of(t) !== undefined)
      ? `it gives ${unloaded.map((t) => of(t)!.ids).join(", ")} ids a caption, not ${CONTEXT_IDS}`
      : whyStopped(run, deadlineMs);
    return failed(NAME, `${who} did not load ${which} from ${dir}: ${how}`, FIX);
  }
  const astray = TOKENIZERS.find((t) => of(t)!.caption.join() !== EXPECTED_IDS.join());
  if (astray !== undefined) {
    const ids = `[${of(astray)!.caption.join(", ")}], not CLIP's [${EXPECTED_IDS.join(", ")}]`;
    return failed(NAME, `${who} tokenizes ${JSON.stringify(CAPTION)} with ${astray.id} from ${dir} as ${ids}`, FIX);
  }
  const what = `${CONTEXT_IDS} ids a caption, CLIP's ids for a known one`;
  return passed(NAME, `both load offline from ${dir} in ${who}, ${what}`);
}

function readLoaded(stdout: string): Map<string, Loaded> {
  const loaded = new Map<string, Loaded>();
  for (const line of stdout.split("\n")) {
    if (!line.startsWith(REPORT_MARK)) continue;
    const parsed = Loaded.safeParse(parseJson(line.slice(REPORT_MARK.length)));
    if (parsed.success) loaded.set(parsed.data.folder, parsed.data);
  }
  return loaded;
}
