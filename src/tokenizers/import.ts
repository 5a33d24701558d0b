import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { statOrNull } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { installTokenizers, type Checked } from "./install.ts";
import { COPIED_FILES, TOKENIZERS, tokenizerFilesProblems, type TokenizerSpec } from "./layout.ts";
import { readSourceFiles } from "./source-files.ts";

interface Imported {
  id: string;
  from: string;
  to: string;
}

// A tokenizer found usable under the source, and where.
interface Found extends Checked {
  from: string;
}


/**
 * Copies both tokenizers from `source` into `dir`, or nothing: a Hugging Face cache (HF_HOME or its hub/
 * folder) or folders already in --tokenizer_cache_dir's layout. What is written is the very bytes that were checked,
 * read from regular files inside `source` only.
 */
export function importTokenizers(source: string, dir: string): Result<Imported[], string[]> {
  if (!statOrNull(source)?.isDirectory()) return fail([`${source} is not a directory`]);
  const root = realpathSync(source);
  const found = TOKENIZERS.map((spec) => findTokenizer(source, root, spec));
  const usable = found.flatMap((f) => (f.ok ? [f.value] : []));
  if (usable.length < found.length) return fail(found.flatMap((f) => (f.ok ? [] : [f.error])));
  const installed = installTokenizers(dir, usable);
  if (!installed.ok) return fail([installed.error]);
  return ok(usable.map(({ spec, from }) => ({ id: spec.id, from, to: join(dir, spec.folder) })));
}

// The first place under `source` that holds a usable copy; else what is wrong with the nearest one.
function findTokenizer(source: string, root: string, spec: TokenizerSpec): Result<Found> {
  const candidates = candidateFolders(source, spec);
  if (candidates.length === 0) {
    const looked = `${spec.folder}/, models--${spec.id.replace("/", "--")}/snapshots/ or hub/models--…`;
    return fail(`tokenizer ${spec.id} is not in ${source} (looked for ${looked})`);
  }
  const tried = candidates.map((from) => checkCandidate(root, from, spec));
  return tried.find((t) => t.ok) ?? tried[0]!;
}

function checkCandidate(root: string, from: string, spec: TokenizerSpec): Result<Found> {
  const read = readSourceFiles(root, from, COPIED_FILES);
  if (!read.ok) return fail(`tokenizer ${spec.id} in ${from} is not imported: ${read.error}`);
  const problems = tokenizerFilesProblems(read.value, spec);
  if (problems.length > 0) return fail(`tokenizer ${spec.id} in ${from} is not usable: ${problems.join("; ")}`);
  return ok({ spec, files: read.value, from });
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
