import {
  accessSync, constants, lstatSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats,
} from "node:fs";
import { lstat, open, readdir } from "node:fs/promises";
import { join } from "node:path";

// A path that cannot be stat'ed (missing, unreadable, a loop) is simply absent to the callers here.
export function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

// True when the name itself exists, even as a dangling symbolic link.
export function hasEntry(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

// Whether this process may read, write or run the path (`constants.R_OK`, `W_OK`, `X_OK`); never one that is missing.
export function mayAccess(path: string, mode: number): boolean {
  try {
    accessSync(path, mode);
    return true;
  } catch {
    return false;
  }
}

// Readers never see half a file: write beside, then rename.
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, data, { mode: 0o640 });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

export function writeJsonAtomic(path: string, value: unknown): void {
  writeFileAtomic(path, JSON.stringify(value));
}

export function readJsonOrNull<T>(path: string): T | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return null;
  }
}

const DIGEST_CHUNK_BYTES = 1024 * 1024;

/** The sha256 of bytes or text (as UTF-8) held in memory, in hex. */
export function sha256Hex(data: string | Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(data).digest("hex");
}

/** The sha256 of a regular file, read without following a link; null when there is none to read. */
export async function digestOf(path: string): Promise<string | null> {
  const file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW).catch(() => null);
  if (file === null) return null;
  try {
    if (!(await file.stat()).isFile()) return null;
    const hasher = new Bun.CryptoHasher("sha256");
    const buffer = Buffer.alloc(DIGEST_CHUNK_BYTES);
    for (;;) {
      const { bytesRead } = await file.read(buffer, 0, DIGEST_CHUNK_BYTES, null);
      if (bytesRead === 0) break;
      hasher.update(buffer.subarray(0, bytesRead));
    }
    return hasher.digest("hex");
  } finally {
    await file.close();
  }
}

/** The bytes of a file or a tree, links counted as themselves; 0 for what cannot be read. */
export async function sizeOf(path: string): Promise<number> {
  let st;
  try {
    st = await lstat(path);
  } catch {
    return 0;
  }
  // lstat: a link is counted as itself and never followed out of the state dir.
  if (!st.isDirectory()) return st.size;
  let sum = 0;
  for (const name of await readdir(path).catch(() => [])) sum += await sizeOf(join(path, name));
  return sum;
}

/** What a file is, in words, for a message: "a FIFO", "a symbolic link", "a directory"… */
export function fileKind(st: Stats): string {
  if (st.isFile()) return "a regular file";
  if (st.isDirectory()) return "a directory";
  if (st.isSymbolicLink()) return "a symbolic link";
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  return "not a regular file";
}

/**
 * A file system error on a file of the job's copy, named as arbo named the file (`shown`) with the error's code and
 * call: the path it happened at lies in the state dir, which no message shows. Anything but such an error (a
 * cancel's reason, a refusal of the worker's own) is given back as it is.
 */
export function faultOn(shown: string, err: unknown): unknown {
  const { code, syscall } = err as NodeJS.ErrnoException;
  if (code === undefined || syscall === undefined) return err;
  return Object.assign(new Error(`${shown}: ${code} (${syscall})`), { code, syscall });
}
