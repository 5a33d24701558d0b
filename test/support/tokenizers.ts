import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TOKENIZERS } from "../../src/tokenizers/layout.ts";

export interface TokenizerShape {
  // CLIP's vocabulary begins with "!" at id 0; tokenizer 2 pads with it.
  idZero?: boolean;
  maxLength?: number;
}

// A small CLIP-shaped tokenizer: the files CLIPTokenizer reads, with CLIP's special-token ids.
function tokenizerFiles({ idZero = true, maxLength = 77 }: TokenizerShape = {}): Record<string, string> {
  const letters = Object.fromEntries([..."abcdefghijklmnopqrstuvwxyz"].map((c, i) => [`${c}</w>`, i + 1]));
  const vocab = { ...(idZero ? { "!": 0 } : {}), ...letters, "<|startoftext|>": 49406, "<|endoftext|>": 49407 };
  return {
    "vocab.json": JSON.stringify(vocab),
    "merges.txt": "#version: 0.2\na b\n",
    "tokenizer_config.json": JSON.stringify({ model_max_length: maxLength, tokenizer_class: "CLIPTokenizer" }),
    "special_tokens_map.json": JSON.stringify({ bos_token: "<|startoftext|>", eos_token: "<|endoftext|>" }),
  };
}

/** One tokenizer folder as sd-scripts' --tokenizer_cache_dir holds it. */
export function writeTokenizerFolder(folder: string, shape: TokenizerShape = {}): string {
  mkdirSync(folder, { recursive: true });
  for (const [name, text] of Object.entries(tokenizerFiles(shape))) writeFileSync(join(folder, name), text);
  return folder;
}

/** Both tokenizers in --tokenizer_cache_dir's layout under `dir`. */
export function writeTokenizers(dir: string): string {
  for (const t of TOKENIZERS) writeTokenizerFolder(join(dir, t.folder));
  return dir;
}

/** A Hugging Face cache (HF_HOME) holding both: hub/models--…/snapshots/REV/ files linked into blobs/. */
export function writeHubCache(home: string, revision = "0123abcd"): string {
  for (const t of TOKENIZERS) {
    const repo = join(home, "hub", `models--${t.id.replace("/", "--")}`);
    const snapshot = join(repo, "snapshots", revision);
    mkdirSync(join(repo, "blobs"), { recursive: true });
    mkdirSync(snapshot, { recursive: true });
    mkdirSync(join(repo, "refs"), { recursive: true });
    writeFileSync(join(repo, "refs", "main"), revision);
    for (const [name, text] of Object.entries(tokenizerFiles())) {
      const blob = new Bun.CryptoHasher("sha256").update(text).digest("hex");
      writeFileSync(join(repo, "blobs", blob), text);
      symlinkSync(join("..", "..", "blobs", blob), join(snapshot, name));
    }
  }
  return home;
}
