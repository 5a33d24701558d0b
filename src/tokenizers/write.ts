// `tokenizers write`: both tokenizer folders from what the program carries, for a box that cannot reach the hub.
// merges.txt is the embedded one (clip-merges.txt.gz); vocab.json follows from it as CLIP builds it (clip-reference.ts:
// the bytes, the bytes with "</w>", one token per merge, the two special tokens). The two JSON files are what the
// lock's transformers (4.54.1) writes for CLIPTokenizer by save_pretrained, which is how sd-scripts itself fills
// --tokenizer_cache_dir after a download: errors and the four special tokens (tokenization_clip.py's arguments), their
// ids, and model_max_length 77, which sd-scripts pads and cuts every caption to. Both pad with "<|endoftext|>", its
// default; sd-scripts sets tokenizer 2's pad_token_id to 0 itself once loaded.
import { join } from "node:path";
import { hasEntry } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { clipMergesText, clipReference } from "./clip-reference.ts";
import { installTokenizers, type Checked } from "./install.ts";
import { TOKENIZERS, tokenizerFilesProblems, tokenizerProblems, type TokenizerSpec } from "./layout.ts";

const BOS = "<|startoftext|>";
const EOS = "<|endoftext|>";
const MODEL_MAX_LENGTH = 77;

const TOKEN_FLAGS = { lstrip: false, normalized: true, rstrip: false, single_word: false };

/** The four files of one tokenizer, from the embedded merges. */
export function carriedFiles(): Map<string, Uint8Array> {
  const { tokens } = clipReference();
  const vocab = Object.fromEntries(tokens.map((token, id) => [token, id]));
  const named = { bos_token: BOS, eos_token: EOS, pad_token: EOS, unk_token: EOS };
  const config = {
    add_prefix_space: false,
    added_tokens_decoder: Object.fromEntries(
      [BOS, EOS].map((t) => [tokens.indexOf(t), { content: t, ...TOKEN_FLAGS, special: true }]),
    ),
    bos_token: BOS, clean_up_tokenization_spaces: false, do_lower_case: true, eos_token: EOS, errors: "replace",
    extra_special_tokens: {}, model_max_length: MODEL_MAX_LENGTH, pad_token: EOS, tokenizer_class: "CLIPTokenizer",
    unk_token: EOS,
  };
  const special = Object.fromEntries(
    Object.entries(named).map(([key, t]) => [key, key === "pad_token" ? t : { content: t, ...TOKEN_FLAGS }]),
  );
  const text = (value: unknown) => new TextEncoder().encode(`${JSON.stringify(value, null, 2)}\n`);
  return new Map([
    ["vocab.json", new TextEncoder().encode(JSON.stringify(vocab))],
    ["merges.txt", new TextEncoder().encode(clipMergesText())],
    ["tokenizer_config.json", text(config)],
    ["special_tokens_map.json", text(special)],
  ]);
}

/** What `write` did with one tokenizer's folder. */
export interface WriteOutcome {
  spec: TokenizerSpec;
  to: string;
  /** "ready": left as it was; "written": there was none; "replaced": there was one, not ready, for `why`. */
  did: "ready" | "written" | "replaced";
  why: string[];
}

/**
 * Writes each tokenizer whose folder in `dir` is not ready, all of them or none (staged beside, then renamed in, as an
 * import is); a ready folder is never touched. The carried files are judged first by the same check as an import's.
 */
export function writeCarriedTokenizers(dir: string): Result<WriteOutcome[], string[]> {
  const outcomes = TOKENIZERS.map((spec): WriteOutcome => {
    const to = join(dir, spec.folder);
    if (!hasEntry(to)) return { spec, to, did: "written", why: [] };
    const why = tokenizerProblems(to, spec);
    return { spec, to, did: why.length === 0 ? "ready" : "replaced", why };
  });
  const due = outcomes.filter((o) => o.did !== "ready").map((o): Checked => ({ spec: o.spec, files: carriedFiles() }));
  const unfit = due.flatMap((t) => tokenizerFilesProblems(t.files, t.spec));
  if (unfit.length > 0) return fail(unfit.map((p) => `the carried tokenizer is not CLIP's: ${p}`));
  if (due.length > 0) {
    const installed = installTokenizers(dir, due);
    if (!installed.ok) return fail([installed.error]);
  }
  return ok(outcomes);
}
