import { closeSync, constants, fstatSync, openSync, readFileSync, realpathSync } from "node:fs";
import { isAbsolute, join, relative } from "node:path";
import { hasEntry } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import type { TokenizerFiles } from "./layout.ts";

// O_NONBLOCK: a FIFO planted under a tokenizer's name opens at once, to be refused by fstat, instead of hanging.
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Reads the named files of `folder` that exist, each a regular file inside `root`: a hub snapshot's links into its
 * blobs/ are followed, a link out of `root` (to /etc/shadow, say) or anything but a regular file is refused.
 */
export function readSourceFiles(root: string, folder: string, names: readonly string[]): Result<TokenizerFiles> {
  const files = new Map<string, Uint8Array>();
  for (const name of names) {
    const path = join(folder, name);
    if (!hasEntry(path)) continue;
    const read = readInside(root, path);
    if (!read.ok) return read;
    files.set(name, read.value);
  }
  return ok(files);
}

function readInside(root: string, path: string): Result<Uint8Array> {
  let real: string;
  try {
    real = realpathSync(path);
  } catch (err) {
    return fail(`${path} cannot be followed (${(err as NodeJS.ErrnoException).code})`);
  }
  const inside = relative(root, real);
  const outside = inside === ".." || inside.startsWith("../") || isAbsolute(inside);
  if (outside) return fail(`${path} leads out of ${root}, to ${real}`);
  return readRegularFile(real);
}

// Opened without following a link, then fstat'ed: what is read is the regular file that was checked.
function readRegularFile(path: string): Result<Uint8Array> {
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch (err) {
    return fail(`${path} cannot be opened (${(err as NodeJS.ErrnoException).code})`);
  }
  try {
    if (!fstatSync(fd).isFile()) return fail(`${path} is not a regular file`);
    return ok(readFileSync(fd));
  } catch (err) {
    return fail(`${path} cannot be read (${(err as NodeJS.ErrnoException).code})`);
  } finally {
    closeSync(fd);
  }
}
