// The Python packages the trainer's venv holds, exact versions, in one place (`python-lock.txt`, built into the
// binary): what `trainer bundle` fetches, `trainer install` installs and `trainer check` compares a venv with.
import lockText from "./python-lock.txt" with { type: "text" };
import { sha256Hex } from "../fs.ts";

/** One pinned package of the lock. */
export interface LockedPackage {
  /** As the lock spells it (pip's request). */
  name: string;
  version: string;
  /** PyPI has no wheel of it: `trainer bundle` builds one from its source, once, on the online machine. */
  fromSource: boolean;
}

// `name==version`, optionally `  # from source`; `#` lines and blank lines are the lock's notes.
const PIN = /^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)(\s+#\s*from source)?\s*$/;

export function parseLock(text: string): LockedPackage[] {
  const pins: LockedPackage[] = [];
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const match = PIN.exec(line);
    if (match === null) throw new Error(`python-lock.txt line ${i + 1} is not "name==version": ${line}`);
    pins.push({ name: match[1]!, version: match[2]!, fromSource: match[3] !== undefined });
  }
  return pins;
}

/** PEP 503's name: the one a wheel's file name, pip and importlib.metadata agree on once normalised. */
export const normalName = (name: string) => name.toLowerCase().replace(/[-_.]+/g, "-");

export const PYTHON_LOCK: readonly LockedPackage[] = parseLock(lockText);
export const LOCK_TEXT: string = lockText;
/** The lock's sha256: a bundle's manifest names it, and an installed venv with it. */
export const LOCK_DIGEST = sha256Hex(lockText);
/** The CPython the lock was resolved for (the torch wheels of the CUDA build are per Python version). */
export const LOCK_PYTHON = "3.11";
