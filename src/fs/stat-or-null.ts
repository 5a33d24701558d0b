import { lstatSync, statSync, type Stats } from "node:fs";

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
