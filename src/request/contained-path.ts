import { realpathSync } from "node:fs";
import { hasEntry } from "../fs.ts";
import { basename, dirname, join, relative, resolve, sep } from "node:path";

export type Containment = { ok: true; real: string } | { ok: false; msg: string; type: string };

export interface Roots {
  paths: readonly string[];
  label: string; // how messages name the roots: they never print a host path the caller did not send
}

// Lexically first (so a path outside is refused without touching it, and reveals nothing about it),
// then with symlinks resolved, so a link inside a root that leads out is refused too.
export function resolveInside(path: string, roots: Roots, allowMissing: boolean): Containment {
  const target = resolve(path);
  const rootReals = roots.paths.map(realOrNull);
  const candidates = [...roots.paths, ...rootReals.filter((r): r is string => r !== null)];
  if (!candidates.some((root) => isStrictlyInside(root, target))) {
    return { ok: false, msg: `${path} is not inside ${roots.label}`, type: "path_outside_root" };
  }
  const real = resolveReal(target, allowMissing);
  if ("error" in real) return { ok: false, msg: `${path} ${real.error}`, type: real.type };
  if (!rootReals.some((root) => root !== null && isStrictlyInside(root, real.path))) {
    return { ok: false, msg: `${path} leads out of ${roots.label} through a symbolic link`, type: "path_outside_root" };
  }
  return { ok: true, real: real.path };
}

export function isStrictlyInside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel !== "" && rel !== ".." && !rel.startsWith(`..${sep}`) && !rel.startsWith(sep);
}

type Real = { path: string } | { error: string; type: string };

// A path that does not exist yet resolves through its nearest existing ancestor; a dangling link is refused,
// since creating through it would land wherever it points.
function resolveReal(path: string, allowMissing: boolean): Real {
  try {
    return { path: realpathSync(path) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    if (code !== "ENOENT") return { error: `cannot be resolved (${code})`, type: "path_unresolvable" };
  }
  if (hasEntry(path)) return { error: "is or passes through a symbolic link whose target does not exist", type: "path_dangling_link" };
  if (!allowMissing) return { error: "does not exist", type: "path_not_found" };
  const parent = dirname(path);
  if (parent === path) return { error: "does not exist", type: "path_not_found" };
  const parentReal = resolveReal(parent, true);
  return "error" in parentReal ? parentReal : { path: join(parentReal.path, basename(path)) };
}

function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}
