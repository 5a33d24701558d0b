import { realpath } from "node:fs/promises";
import { basename, dirname, join, relative, resolve, sep } from "node:path";

export type Containment = { ok: true; real: string } | { ok: false; msg: string; type: string };

// Symlinks are resolved before comparing, so a link inside a root that points outside is refused.
export async function resolveInside(path: string, roots: readonly string[], allowMissing: boolean): Promise<Containment> {
  const real = await realOrNearest(resolve(path), allowMissing).catch((err: NodeJS.ErrnoException) => err);
  if (real instanceof Error) return { ok: false, msg: `${path} cannot be resolved (${real.code ?? real.message})`, type: "path_unresolvable" };
  if (real === null) return { ok: false, msg: `${path} does not exist`, type: "path_not_found" };
  for (const root of roots) {
    const rootReal = await realpath(root).catch(() => null);
    if (rootReal !== null && isStrictlyInside(rootReal, real)) return { ok: true, real };
  }
  return { ok: false, msg: `${path} resolves to ${real}, which is not inside ${roots.join(" or ")}`, type: "path_outside_root" };
}

export function isStrictlyInside(root: string, target: string): boolean {
  const rel = relative(root, target);
  return rel !== "" && rel !== ".." && !rel.startsWith(`..${sep}`) && !rel.startsWith(sep);
}

// A path that does not exist yet resolves through its nearest existing ancestor.
async function realOrNearest(path: string, allowMissing: boolean): Promise<string | null> {
  const found = await realpath(path).catch((err: NodeJS.ErrnoException) => (err.code === "ENOENT" ? null : Promise.reject(err)));
  if (found !== null || !allowMissing) return found;
  const parent = dirname(path);
  if (parent === path) return null;
  const parentReal = await realOrNearest(parent, true);
  return parentReal === null ? null : join(parentReal, basename(path));
}
