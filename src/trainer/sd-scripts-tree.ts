// Which sd-scripts a folder holds, told by its content: a tree laid out from a fetched copy has no `.git`, so the
// commit is recognised by git's own identity of each file (the blob id of its bytes) against the list of the
// commit the recipe is proven on, `sd-scripts-48d368f.txt` (`git ls-tree -r 48d368f`: blob id, tab, path).
import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import provenList from "./sd-scripts-48d368f.txt" with { type: "text" };
import { sha256Hex } from "../fs.ts";

/** The sd-scripts commit the recipe is proven against (docs/recipe.md). */
export const PROVEN_COMMIT = "48d368fa557731ad0488c07304dfeba8c07910eb";
export const PROVEN_SHORT = PROVEN_COMMIT.slice(0, 7);

// What a run leaves in a checkout and git never holds: Python's caches and a `pip install -e .`'s metadata.
export const NOT_SOURCE = (name: string) =>
  name === "__pycache__" || name.endsWith(".pyc") || name.endsWith(".egg-info");

/** What a folder holds against the proven commit's files. */
export interface TreeVerdict {
  /** Every file is the proven commit's, byte for byte, and none of its Python sources is missing. */
  proven: boolean;
  /** sha256 over the sorted "blob path" lines of what the folder holds: the same tree always gives the same. */
  digest: string;
  files: number;
  /** Paths whose bytes differ from the proven commit's. */
  changed: string[];
  /** Paths the proven commit does not hold. */
  added: string[];
  /** The proven commit's paths the folder lacks (a fetched copy may lack its largest files). */
  missing: string[];
}

const proven = new Map(
  provenList.split("\n").filter((line) => line !== "").map((line) => {
    const [blob, path] = line.split("\t") as [string, string];
    return [path, blob];
  }),
);

// git's id of a file's bytes: sha1 of "blob <size>\0" and the bytes.
function blobId(bytes: Uint8Array): string {
  const hasher = new Bun.CryptoHasher("sha1");
  hasher.update(`blob ${bytes.length}\0`);
  hasher.update(bytes);
  return hasher.digest("hex");
}

/** Every regular file under `root` but `.git` and Python's caches, as paths relative to it, sorted. */
export function treeFiles(root: string): string[] {
  const found: string[] = [];
  const walk = (rel: string) => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      if ((rel === "" && name === ".git") || NOT_SOURCE(name)) continue;
      const path = rel === "" ? name : `${rel}/${name}`;
      const st = lstatSync(join(root, path));
      if (st.isDirectory()) walk(path);
      else if (st.isFile()) found.push(path);
    }
  };
  walk("");
  return found.sort();
}

export function judgeTree(root: string): TreeVerdict {
  const files = treeFiles(root);
  const lines: string[] = [];
  const [changed, added] = [[] as string[], [] as string[]];
  for (const path of files) {
    const blob = blobId(readFileSync(join(root, path)));
    lines.push(`${blob} ${path}`);
    const expected = proven.get(path);
    if (expected === undefined) added.push(path);
    else if (expected !== blob) changed.push(path);
  }
  const held = new Set(files);
  const missing = [...proven.keys()].filter((path) => !held.has(path));
  const digest = sha256Hex(`${lines.join("\n")}\n`);
  const lacksSource = missing.some((path) => path.endsWith(".py"));
  return {
    proven: changed.length === 0 && added.length === 0 && !lacksSource,
    digest, files: files.length, changed, added, missing,
  };
}

const FIRST = 5;
const some = (paths: string[]) =>
  paths.length <= FIRST ? paths.join(", ") : `${paths.slice(0, FIRST).join(", ")} and ${paths.length - FIRST} more`;

/** One sentence: how the tree differs from the proven commit, or that it is it. */
export function describeTree(verdict: TreeVerdict): string {
  const absent = verdict.missing.length === 0 ? "" : `; absent (not Python sources): ${some(verdict.missing)}`;
  if (verdict.proven) return `sd-scripts ${PROVEN_SHORT}: ${verdict.files} files, each that commit's bytes${absent}`;
  const parts = [
    verdict.changed.length > 0 ? `${verdict.changed.length} changed (${some(verdict.changed)})` : "",
    verdict.added.length > 0 ? `${verdict.added.length} not in it (${some(verdict.added)})` : "",
    verdict.missing.length > 0 ? `${verdict.missing.length} missing (${some(verdict.missing)})` : "",
  ].filter((part) => part !== "");
  return `not sd-scripts ${PROVEN_SHORT}: of its files, ${parts.join("; ")}`;
}
