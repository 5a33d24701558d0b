import { accessSync, lstatSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from "node:fs";

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
export function writeJsonAtomic(path: string, value: unknown): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, JSON.stringify(value), { mode: 0o640 });
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

export function readJsonOrNull<T>(path: string): T | null {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch {
    return null;
  }
}
