// One install at a time per venv: a folder beside it made with mkdir (atomic), naming the process that holds it.
// A lock whose process is gone is taken over; its install's leftovers are the new holder's to clear.
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { identify, isSameProcess, type ProcessIdentity } from "../os/proc.ts";
import { fail, ok, type Result } from "../result.ts";

const OWNER = "owner.json";

export interface InstallLock extends Disposable {
  path: string;
}

export function takeInstallLock(parent: string, name: string): Result<InstallLock> {
  const path = join(parent, `.${name}.install-lock`);
  if (!made(path)) {
    const owner = ownerOf(path);
    if (owner === null || isSameProcess(owner)) {
      const who = owner === null ? "one that is starting" : `process ${owner.pid}`;
      return fail(`another install of ${join(parent, name)} is running (${who}, holding ${path}); wait for it to ` +
        "end, or remove that folder if no install runs");
    }
    // Its holder is gone: moved aside whole, so two takers never both remove it and take it.
    const stale = `${path}.stale-${process.pid}`;
    try {
      renameSync(path, stale);
    } catch {
      return fail(`another install of ${join(parent, name)} took over ${path} just now`);
    }
    rmSync(stale, { recursive: true, force: true });
    if (!made(path)) return fail(`another install of ${join(parent, name)} took over ${path} just now`);
  }
  writeFileSync(join(path, OWNER), JSON.stringify(identify(process.pid)));
  return ok({ path, [Symbol.dispose]: () => rmSync(path, { recursive: true, force: true }) });
}

function made(path: string): boolean {
  try {
    mkdirSync(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
}

function ownerOf(path: string): ProcessIdentity | null {
  try {
    return JSON.parse(readFileSync(join(path, OWNER), "utf8")) as ProcessIdentity;
  } catch {
    return null;
  }
}
