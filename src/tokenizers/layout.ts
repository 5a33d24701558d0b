import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { statOrNull } from "../fs.ts";
import { type BpePin, CLIP_BPE } from "./clip-reference.ts";
import { clipVocabularyProblems } from "./clip-vocabulary.ts";
import { namedTokens } from "./named-tokens.ts";

// The two CLIP tokenizers sdxl_train_network.py loads (library/strategy_sdxl.py). Given --tokenizer_cache_dir,
// sd-scripts reads <dir>/<id with "/" as "_"> (strategy_base.py _load_tokenizer); a folder that is not there
// sends it to the hub, which fails offline before the first step.
export interface TokenizerSpec {
  id: string;
  folder: string;
  /** sd-scripts sets tokenizer 2's pad_token_id to 0 (CLIP's "!"); doctor loads it the same way. */
  padsWithIdZero: boolean;
  /** The digests its merges and vocabulary must have: both ids hold CLIP's BPE, the same two files. */
  bpe: BpePin;
}

export const TOKENIZERS: readonly TokenizerSpec[] = [
  { id: "openai/clip-vit-large-patch14", padsWithIdZero: false, bpe: CLIP_BPE },
  { id: "laion/CLIP-ViT-bigG-14-laion2B-39B-b160k", padsWithIdZero: true, bpe: CLIP_BPE },
].map((t) => ({ ...t, folder: t.id.replace("/", "_") }));

// What CLIPTokenizer.from_pretrained reads, checked; tokenizer.json (the fast tokenizer's, which it does not read) is
// copied when present.
export const REQUIRED_FILES = ["vocab.json", "merges.txt", "tokenizer_config.json"] as const;
const OPTIONAL_FILES = ["special_tokens_map.json", "added_tokens.json"] as const;
const READ_FILES = [...REQUIRED_FILES, ...OPTIONAL_FILES];
/** Every file an import copies when the source has it. */
export const COPIED_FILES = [...READ_FILES, "tokenizer.json"];

// CLIP's context: sd-scripts tokenizes every caption to exactly this many ids.
const MODEL_MAX_LENGTH = 77;

const DEFAULT_TOKENIZER_FOLDER = "tokenizers";

export function tokenizerDir(config: Config): string {
  return config.trainer.tokenizer_dir ?? join(config.state_dir, DEFAULT_TOKENIZER_FOLDER);
}

/** A tokenizer's files by name, their contents as the trainer will read them. */
export type TokenizerFiles = ReadonlyMap<string, Uint8Array>;

/** What is wrong with one tokenizer folder, each as a sentence; none when sd-scripts can load it. */
export function tokenizerProblems(folder: string, spec: TokenizerSpec): string[] {
  if (!statOrNull(folder)?.isDirectory()) return [`${spec.folder} is missing (tokenizer ${spec.id})`];
  return tokenizerFilesProblems(readFolder(folder), spec);
}

/** Every problem of the two tokenizers in `dir`; none when both are ready. */
export function tokenizersProblems(dir: string): string[] {
  return TOKENIZERS.flatMap((spec) => tokenizerProblems(join(dir, spec.folder), spec));
}

/** What is wrong with one tokenizer's files: one missing, or their content not CLIP's, exactly, as CLIPTokenizer reads
 * it. `tokenizers import`, the start-up log, /healthz and doctor all judge by this. */
export function tokenizerFilesProblems(files: TokenizerFiles, spec: TokenizerSpec): string[] {
  const where = (problem: string) => `${spec.folder}/${problem}`;
  const missing = REQUIRED_FILES.filter((file) => !files.has(file));
  if (missing.length > 0) return missing.map((file) => where(`${file} is missing`));
  const texts = new Map(READ_FILES.map((file) => [file, files.has(file) ? decodeUtf8(files.get(file)!) : undefined]));
  const notText = READ_FILES.filter((file) => texts.get(file) === null).map((file) => `${file} is not UTF-8 text`);
  if (notText.length > 0) return notText.map(where);
  const text = (file: (typeof READ_FILES)[number]) => texts.get(file) ?? undefined;
  const config = text("tokenizer_config.json")!;
  const named = namedTokens({ added: text("added_tokens.json"), config, special: text("special_tokens_map.json") });
  if (typeof named === "string") return [where(named)];
  const bpe = clipVocabularyProblems(text("vocab.json")!, text("merges.txt")!, spec.bpe, named);
  return [...bpe, ...configProblems(config).map((p) => `tokenizer_config.json ${p}`)].map(where);
}

// What CLIPTokenizer reads, as it reads it: an unreadable file is one it would not find either.
function readFolder(folder: string): TokenizerFiles {
  const files = new Map<string, Uint8Array>();
  for (const file of READ_FILES) {
    try {
      files.set(file, readFileSync(join(folder, file)));
    } catch {
      continue;
    }
  }
  return files;
}

function decodeUtf8(bytes: Uint8Array): string | null {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return null;
  }
}

function configProblems(text: string): string[] {
  const config = parseJson(text);
  if (typeof config !== "object" || config === null) return ["is not a JSON object"];
  const length = (config as Record<string, unknown>).model_max_length;
  if (length === MODEL_MAX_LENGTH) return [];
  return [`says model_max_length ${JSON.stringify(length ?? null)}, not CLIP's ${MODEL_MAX_LENGTH}`];
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
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
      [".", ...READ_FILES].map((file) => {
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
