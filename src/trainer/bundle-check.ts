// What `trainer install` holds a bundle to before any of it runs: its members as the archive's headers list them
// (regular files and folders only, each inside the bundle's four parts), then the unpacked files against the
// manifest (every wheel by sha256 and no other, the lock by digest and its pins the wheels', sd-scripts' tree by its
// content digest). Each refusal is one sentence.
import { existsSync, lstatSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { digestOf, sha256Hex } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import { normalName, parseLock } from "./lock.ts";
import { BUNDLE_PARTS, LOCK_FILE, MANIFEST, type Manifest, SD_SCRIPTS, WHEELS } from "./manifest.ts";
import { judgeTree, NOT_SOURCE, PROVEN_COMMIT } from "./sd-scripts-tree.ts";
import type { TarMember } from "./tar-members.ts";

export function judgeMembers(members: readonly TarMember[]): Result<void> {
  const seen = new Set<string>();
  for (const member of members) {
    const name = member.name.replace(/^(\.\/)+/, "").replace(/\/$/, "");
    const fault = memberFault(name, member.kind);
    if (fault !== null) return fail(`its member ${JSON.stringify(member.name)} ${fault}`);
    if (seen.has(name)) return fail(`its member ${JSON.stringify(member.name)} stands in it twice`);
    seen.add(name);
  }
  for (const part of BUNDLE_PARTS) {
    if (!seen.has(part)) return fail(`it holds no ${part}: it is not a whole bundle (made again by trainer bundle?)`);
  }
  return ok(undefined);
}

function memberFault(name: string, kind: string): string | null {
  if (kind !== "file" && kind !== "dir") return `is a ${kind}; a bundle holds only regular files and folders`;
  const segments = name.split("/");
  if (name.startsWith("/") || segments.some((s) => s === "" || s === "." || s === "..")) {
    return "leaves its folder (an absolute path or a . or .. segment)";
  }
  const [top, ...rest] = segments as [string, ...string[]];
  if (!(BUNDLE_PARTS as readonly string[]).includes(top)) {
    return `is not one of a bundle's parts (${BUNDLE_PARTS.join(", ")})`;
  }
  if ((top === MANIFEST || top === LOCK_FILE) && (kind !== "file" || rest.length > 0)) return "is not a file";
  if ((top === WHEELS || top === SD_SCRIPTS) && rest.length === 0 && kind !== "dir") return "is not a folder";
  if (top === WHEELS && rest.length > 0 && (rest.length > 1 || kind !== "file")) return "is not a wheel file";
  if (top === SD_SCRIPTS && rest.some((s) => s === ".git" || NOT_SOURCE(s))) {
    return "is a cache or checkout file trainer bundle never writes (a stale .pyc would run in place of its source)";
  }
  return null;
}

export async function judgeUnpacked(dir: string, manifest: Manifest): Promise<Result<void>> {
  const lockText = readFileSync(join(dir, LOCK_FILE), "utf8");
  if (sha256Hex(lockText) !== manifest.lock_digest) return fail(`its ${LOCK_FILE} is not the lock its manifest names`);
  const pins = lockPins(lockText);
  if (!pins.ok) return pins;
  const wheels = await judgeWheels(join(dir, WHEELS), manifest, pins.value);
  if (!wheels.ok) return wheels;
  return judgeSdScripts(join(dir, SD_SCRIPTS), manifest);
}

function lockPins(text: string): Result<Set<string>> {
  try {
    return ok(new Set(parseLock(text).map((pin) => `${normalName(pin.name)}==${pin.version}`)));
  } catch (err) {
    return fail(`its ${LOCK_FILE} is not a lock: ${(err as Error).message}`);
  }
}

async function judgeWheels(dir: string, manifest: Manifest, pins: Set<string>): Promise<Result<void>> {
  const named = new Set(manifest.wheels.map((w) => w.file));
  const extra = readdirSync(dir).filter((file) => !named.has(file));
  if (extra.length > 0) return fail(`its wheel ${extra[0]} is not one its manifest names`);
  for (const wheel of manifest.wheels) {
    if (!pins.has(`${normalName(wheel.name)}==${wheel.version}`)) {
      return fail(`its manifest's wheel ${wheel.name}==${wheel.version} is not a pin of its lock`);
    }
    const path = join(dir, wheel.file);
    if (!existsSync(path) || !lstatSync(path).isFile()) {
      return fail(`it lacks the wheel ${wheel.file} its manifest names`);
    }
    const found = await digestOf(path);
    if (found !== wheel.sha256) {
      return fail(`its wheel ${wheel.file} is not the one its manifest names (sha256 ${found}, the manifest says ` +
        `${wheel.sha256})`);
    }
  }
  if (manifest.wheels.length !== pins.size) {
    return fail(`its manifest names ${manifest.wheels.length} wheels for the lock's ${pins.size} pins`);
  }
  return ok(undefined);
}

function judgeSdScripts(dir: string, manifest: Manifest): Result<void> {
  const tree = judgeTree(dir);
  if (tree.digest !== manifest.sd_scripts_digest) {
    return fail(`its sd-scripts tree is not the one its manifest names (${tree.files} files whose digest differs: ` +
      "a bundle cut short, or a tree changed after it was made)");
  }
  if (manifest.sd_scripts_commit !== null && (manifest.sd_scripts_commit !== PROVEN_COMMIT || !tree.proven)) {
    const named = manifest.sd_scripts_commit.slice(0, 7);
    return fail(`its manifest calls its sd-scripts tree ${named}, and the tree is not that commit's`);
  }
  return ok(undefined);
}
