import { realpathSync } from "node:fs";
import { hasEntry } from "../fs.ts";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { fail, ok, type Result } from "../result.ts";
import type { Problem } from "./schema.ts";

export interface Roots {
  paths: readonly string[];
  label: string; // how messages name the roots: they never print a host path the caller did not send
}

// Lexically first (so a path outside is refused without touching it, and reveals nothing about it),
// then with symlinks resolved, so a link inside a root that leads out is refused too. The value is the real path.
export function resolveInside(path: string, roots: Roots, allowMissing: boolean): Result<string, Problem> {
  const target = resolve(path);
  const rootReals = roots.paths.map(realOrNull);
  const candidates = [...roots.paths, ...rootReals.filter((r): r is string => r !== null)];
  if (!candidates.some((root) => isStrictlyInside(root, target))) {
    return fail({ msg: `${path} is not inside ${roots.label}`, type: "path_outside_root" });
  }
  const real = resolveReal(target, allowMissing);
  if (!real.ok) return fail({ msg: `${path} ${real.error.msg}`, type: real.error.type });
  if (!rootReals.some((root) => root !== null && isStrictlyInside(root, real.value))) {
    return fail({ msg: `${path} leads out of ${roots.label} through a symbolic link`, type: "path_outside_root" });
  }
  return real;
}

export function isStrictlyInside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel !== "" && rel !== ".." && !rel.startsWith(`..${sep}`) && !rel.startsWith(sep);
}

// A path that does not exist yet resolves through its nearest existing ancestor; a dangling link is refused,
// since creating through it would land wherever it points. The error's msg follows the path.
function resolveReal(path: string, allowMissing: boolean): Result<string, Problem> {
  try {
    return ok(realpathSync(path));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    if (code !== "ENOENT") return fail({ msg: `cannot be resolved (${code})`, type: "path_unresolvable" });
  }
  if (hasEntry(path)) {
    const msg = "is or passes through a symbolic link whose target does not exist";
    return fail({ msg, type: "path_dangling_link" });
  }
  if (!allowMissing) return fail({ msg: "does not exist", type: "path_not_found" });
  const parent = dirname(path);
  if (parent === path) return fail({ msg: "does not exist", type: "path_not_found" });
  const parentReal = resolveReal(parent, true);
  return parentReal.ok ? ok(join(parentReal.value, basename(path))) : parentReal;
}

export function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}
