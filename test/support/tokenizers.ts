import { lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { BYTE_SYMBOLS } from "../../src/tokenizers/clip-bpe.ts";
import { TOKENIZERS } from "../../src/tokenizers/layout.ts";

/** CLIP's real merges.txt (test/fixtures/clip/SOURCES.md). */
export const CLIP_MERGES = new TextDecoder().decode(
  Bun.gunzipSync(readFileSync(join(import.meta.dir, "..", "fixtures", "clip", "merges.txt.gz"))),
);

/** vocab.json built from a merges.txt as CLIP builds its own: consistent with those merges. */
export function vocabFor(merges: string): string {
  const merged = merges.trim().split("\n").slice(1).map((line) => line.replace(" ", ""));
  const tokens = [...BYTE_SYMBOLS, ...BYTE_SYMBOLS.map((s) => `${s}</w>`), ...merged, "<|startoftext|>", "<|endoftext|>"];
  return JSON.stringify(Object.fromEntries(tokens.map((token, id) => [token, id])));
}

export const CLIP_VOCAB = vocabFor(CLIP_MERGES);

/** CLIP's merges with the n-th and the next swapped (merges.txt lines n + 1 and n + 2), vocab.json rebuilt to agree:
 * consistent with itself, tokenizing common captions as CLIP does, and not CLIP's. */
export function swappedMerges(n: number): { merges: string; vocab: string } {
  const [header, ...lines] = CLIP_MERGES.trimEnd().split("\n");
  [lines[n - 1], lines[n]] = [lines[n]!, lines[n - 1]!];
  const merges = `${[header, ...lines].join("\n")}\n`;
  return { merges, vocab: vocabFor(merges) };
}

export interface TokenizerShape {
  maxLength?: number;
  merges?: string;
  vocab?: string;
}

// A real CLIP tokenizer: the files CLIPTokenizer reads, as the hub holds them.
function tokenizerFiles({ maxLength = 77, merges = CLIP_MERGES, vocab = CLIP_VOCAB }: TokenizerShape = {}) {
  return {
    "vocab.json": vocab,
    "merges.txt": merges,
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

/**
 * A second import, unlike writeTokenizers' in both: tokenizer 1 with a tokenizer.json, tokenizer 2 with its
 * vocab.json written one token a line (about 950 kB, the compact one 850 kB).
 */
export function secondImport(dir: string): string {
  const [first, second] = TOKENIZERS;
  writeTokenizers(dir);
  writeFileSync(join(dir, first!.folder, "tokenizer.json"), "{}");
  writeTokenizerFolder(join(dir, second!.folder), { vocab: JSON.stringify(JSON.parse(CLIP_VOCAB), null, 1) });
  return dir;
}

/** Every file under `dir`, by path, with its contents: what an import may or may not have changed. */
export function filesUnder(dir: string): Record<string, string> {
  return Object.fromEntries(
    readdirSync(dir, { recursive: true, encoding: "utf8" }).sort().map((p) => {
      const path = join(dir, p);
      return [p, lstatSync(path).isFile() ? readFileSync(path, "utf8") : "(folder)"];
    }),
  );
}

/** `lora-worker tokenizers ARGS` run by `command`; `limit` caps files at that many bytes (SIGXFSZ ignored: EFBIG). */
export async function runTokenizers(command: string[], args: string[], limit?: number) {
  const argv = [...command, "tokenizers", ...args];
  const capped = limit === undefined ? argv : ["sh", "-c", `trap '' XFSZ; exec prlimit --fsize=${limit} -- "$@"`, "sh", ...argv];
  const proc = Bun.spawn(capped, { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! } });
  const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code, stdout, stderr };
}
