import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { statOrNull } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { OPTIONAL_FILES, REQUIRED_FILES, TOKENIZERS, tokenizerProblems, type TokenizerSpec } from "./layout.ts";

interface Imported {
  id: string;
  from: string;
  to: string;
}

// Tokenizers are public data the trainer (the service user) reads, whoever ran the import.
const DIR_MODE = 0o755;
const FILE_MODE = 0o644;

/**
 * Copies both tokenizers from `source` into `dir`, or nothing: a Hugging Face cache (HF_HOME or its hub/
 * folder) or folders already in --tokenizer_cache_dir's layout. Each is checked before anything is written.
 */
export function importTokenizers(source: string, dir: string): Result<Imported[], string[]> {
  if (!statOrNull(source)?.isDirectory()) return fail([`${source} is not a directory`]);
  const found = TOKENIZERS.map((spec) => findTokenizer(source, spec));
  const problems = found.flatMap((f) => (f.ok ? [] : [f.error]));
  if (problems.length > 0) return fail(problems);
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  return ok(found.map((f, i) => install(f.ok ? f.value : "", dir, TOKENIZERS[i]!)));
}

// The first place under `source` that holds a usable copy; else what is wrong with the nearest one.
function findTokenizer(source: string, spec: TokenizerSpec): Result<string> {
  const candidates = candidateFolders(source, spec);
  for (const folder of candidates) {
    if (tokenizerProblems(folder, spec).length === 0) return ok(folder);
  }
  if (candidates.length === 0) {
    const looked = `${spec.folder}/, models--${spec.id.replace("/", "--")}/snapshots/ or hub/models--…`;
    return fail(`tokenizer ${spec.id} is not in ${source} (looked for ${looked})`);
  }
  const why = tokenizerProblems(candidates[0]!, spec).join("; ");
  return fail(`tokenizer ${spec.id} in ${candidates[0]} is not usable: ${why}`);
}

// The cache-dir layout first, then a hub cache's snapshots, the one refs/main names first.
function candidateFolders(source: string, spec: TokenizerSpec): string[] {
  const repo = `models--${spec.id.replace("/", "--")}`;
  const hubs = [source, join(source, "hub")].map((hub) => join(hub, repo));
  const snapshots = hubs.flatMap((cache) => snapshotsOf(cache));
  return [join(source, spec.folder), ...snapshots].filter((folder) => statOrNull(folder)?.isDirectory());
}

function snapshotsOf(cache: string): string[] {
  const root = join(cache, "snapshots");
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const main = readText(join(cache, "refs", "main"));
  return names.sort((a, b) => Number(b === main) - Number(a === main)).map((name) => join(root, name));
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8").trim();
  } catch {
    return null;
  }
}

// Written beside, then swapped in: a trainer starting meanwhile sees the old folder or the new, never half.
function install(from: string, dir: string, spec: TokenizerSpec): Imported {
  const to = join(dir, spec.folder);
  const fresh = `${to}.import-${process.pid}`;
  const old = `${to}.old-${process.pid}`;
  rmSync(fresh, { recursive: true, force: true });
  mkdirSync(fresh, { mode: DIR_MODE });
  chmodSync(fresh, DIR_MODE);
  // A hub snapshot's files are links into blobs/: the copies are the contents.
  for (const file of [...REQUIRED_FILES, ...OPTIONAL_FILES]) {
    if (!statOrNull(join(from, file))?.isFile()) continue;
    copyFileSync(join(from, file), join(fresh, file));
    chmodSync(join(fresh, file), FILE_MODE);
  }
  const replacing = statOrNull(to) !== null;
  if (replacing) renameSync(to, old);
  renameSync(fresh, to);
  if (replacing) rmSync(old, { recursive: true, force: true });
  return { id: spec.id, from, to };
}
