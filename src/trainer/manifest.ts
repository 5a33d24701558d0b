// A trainer bundle's manifest: what `trainer bundle` writes and the only thing `trainer install` trusts. Every
// file the install uses is held to it (each wheel by sha256, the lock by digest, sd-scripts' tree by its content
// digest), and pip's requirements are written from it, never read from the archive.
import { z } from "zod";

export const MANIFEST = "manifest.json";
export const WHEELS = "wheels";
export const SD_SCRIPTS = "sd-scripts";
export const LOCK_FILE = "python-lock.txt";
/** What a bundle's top level may hold, nothing else. */
export const BUNDLE_PARTS = [MANIFEST, LOCK_FILE, WHEELS, SD_SCRIPTS] as const;
export const FORMAT = 2;

/** CPython's major.minor and platform, as pip tags a wheel for them. */
export const PYTHON_PROBE = "import sys, sysconfig; print('%d.%d' % sys.version_info[:2], sysconfig.get_platform())";

const sha256 = z.string().regex(/^[0-9a-f]{64}$/, "must be 64 lowercase hex digits");
// Names pip reads in a requirements line and a folder holds: nothing that could be an option or a path.
const Wheel = z.strictObject({
  file: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._+!-]*\.whl$/, "must be a wheel's file name"),
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "must be a package name"),
  version: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9.+!_-]*$/, "must be a version"),
  sha256,
});

export const ManifestShape = z.strictObject({
  format: z.literal(FORMAT),
  /** The proven commit, or null for a tree taken with --other-sd-scripts. */
  sd_scripts_commit: z.string().nullable(),
  /** sha256 over the tree's "blob path" lines (sd-scripts-tree.ts). */
  sd_scripts_digest: sha256,
  lock_digest: sha256,
  /** CPython major.minor the wheels are for. */
  python_version: z.string().regex(/^3\.\d{1,2}$/),
  /** The wheels' platform: pip's --platform tag, or the bundling machine's (`sysconfig.get_platform()`). */
  platform: z.string(),
  wheels: z.array(Wheel).min(1),
});
export type Manifest = z.infer<typeof ManifestShape>;

// `name==version --hash=sha256:…` per wheel: pip installs exactly these files and refuses any other.
export function requirementsOf(manifest: Manifest): string {
  return manifest.wheels.map((w) => `${w.name}==${w.version} --hash=sha256:${w.sha256}\n`).join("");
}
