import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { statOrNull } from "../fs.ts";

// The two CLIP tokenizers sdxl_train_network.py loads (library/strategy_sdxl.py). Given --tokenizer_cache_dir,
// sd-scripts reads <dir>/<id with "/" as "_"> (strategy_base.py _load_tokenizer); a folder that is not there
// sends it to the hub, which fails offline before the first step.
export interface TokenizerSpec {
  id: string;
  folder: string;
  // sd-scripts sets tokenizer 2's pad_token_id to 0, so the vocabulary must hold an id 0.
  padsWithIdZero: boolean;
}

export const TOKENIZERS: readonly TokenizerSpec[] = [
  { id: "openai/clip-vit-large-patch14", padsWithIdZero: false },
  { id: "laion/CLIP-ViT-bigG-14-laion2B-39B-b160k", padsWithIdZero: true },
].map((t) => ({ ...t, folder: t.id.replace("/", "_") }));

// What CLIPTokenizer.from_pretrained reads; the others are copied when present.
export const REQUIRED_FILES = ["vocab.json", "merges.txt", "tokenizer_config.json"] as const;
export const OPTIONAL_FILES = ["special_tokens_map.json", "added_tokens.json", "tokenizer.json"] as const;

// CLIP's context: sd-scripts tokenizes every caption to exactly this many ids.
const MODEL_MAX_LENGTH = 77;
const SPECIAL_TOKENS = ["<|startoftext|>", "<|endoftext|>"];

const DEFAULT_TOKENIZER_FOLDER = "tokenizers";

export function tokenizerDir(config: Config): string {
  return config.trainer.tokenizer_dir ?? join(config.state_dir, DEFAULT_TOKENIZER_FOLDER);
}

/** What is wrong with one tokenizer folder, each as a sentence; none when sd-scripts can load it. */
export function tokenizerProblems(folder: string, spec: TokenizerSpec): string[] {
  const where = (file: string) => `${spec.folder}/${file}`;
  if (!statOrNull(folder)?.isDirectory()) return [`${spec.folder} is missing (tokenizer ${spec.id})`];
  const missing = REQUIRED_FILES.filter((file) => !statOrNull(join(folder, file))?.isFile());
  if (missing.length > 0) return missing.map((file) => `${where(file)} is missing`);
  const vocabulary = vocabularyProblems(readJson(join(folder, "vocab.json")), spec);
  const config = configProblems(readJson(join(folder, "tokenizer_config.json")));
  return [
    ...vocabulary.map((p) => `${where("vocab.json")} ${p}`),
    ...config.map((p) => `${where("tokenizer_config.json")} ${p}`),
  ];
}

/** Every problem of the two tokenizers in `dir`; none when both are ready. */
export function tokenizersProblems(dir: string): string[] {
  return TOKENIZERS.flatMap((spec) => tokenizerProblems(join(dir, spec.folder), spec));
}

function vocabularyProblems(vocab: unknown, spec: TokenizerSpec): string[] {
  if (typeof vocab !== "object" || vocab === null || Array.isArray(vocab)) return ["is not a JSON object of ids"];
  const entries = Object.entries(vocab);
  if (!entries.every(([, id]) => Number.isInteger(id))) return ["maps a token to something other than an integer id"];
  const problems = SPECIAL_TOKENS.filter((t) => !(t in vocab)).map((t) => `has no ${t} token`);
  if (spec.padsWithIdZero && !entries.some(([, id]) => id === 0)) {
    problems.push("has no id 0, which sd-scripts uses as this tokenizer's padding id");
  }
  return problems;
}

function configProblems(config: unknown): string[] {
  if (typeof config !== "object" || config === null) return ["is not a JSON object"];
  const length = (config as Record<string, unknown>).model_max_length;
  if (length === MODEL_MAX_LENGTH) return [];
  return [`says model_max_length ${JSON.stringify(length ?? null)}, not CLIP's ${MODEL_MAX_LENGTH}`];
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
}

interface TokenizerReadiness {
  dir: string;
  ready: boolean;
  problems: string[];
}

/** The readiness of `dir`, read again only when one of the files it looks at changed (by size or mtime). */
export function watchTokenizers(dir: string): () => TokenizerReadiness {
  let seen: { key: string; readiness: TokenizerReadiness } | null = null;
  return () => {
    const key = TOKENIZERS.flatMap((t) =>
      [".", ...REQUIRED_FILES].map((file) => {
        const st = statOrNull(join(dir, t.folder, file));
        return st === null ? "-" : `${st.ino}:${st.size}:${st.mtimeMs}`;
      })
    ).join(",");
    if (seen?.key !== key) {
      const problems = tokenizersProblems(dir);
      seen = { key, readiness: { dir, ready: problems.length === 0, problems } };
    }
    return seen.readiness;
  };
}
