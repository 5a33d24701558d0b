import { constants, realpathSync } from "node:fs";
import { type FileHandle, link, lstat, open, unlink } from "node:fs/promises";
import { basename, dirname, join, relative, sep } from "node:path";
import type { ErrorCode } from "../job.ts";
import { fileKind } from "../fs.ts";
import { NotAsExpected, openFileIn, pinChain, type PinnedDir } from "../pinned-dir.ts";
import { isStrictlyInside, resolveInside } from "../request/contained-path.ts";
import type { JobRequest } from "../request/schema.ts";
import { fail, ok, type Result } from "../result.ts";

// The trainer writes into the job's private run directory; arbo's output_dir only ever receives the final LoRA,
// whole and verified: copied to a hidden name beside its place, synced, checked against the digest the worker
// verified, then linked into place. A link never replaces a file, so an output that appeared meanwhile is kept
// as it is (the 409 output_exists of the request, held to the last moment). arbo may change the handoff root at
// any time: output_dir is reached from the root folder by folder without following a link (pinned-dir.ts), every
// name is then used in that opened folder, the hidden name is created exclusively, and nothing opened there can
// block (a FIFO at either name fails the job instead of hanging the worker).

const CHUNK_BYTES = 1024 * 1024;
// In the setgid handoff root, arbo's group keeps the folders the worker makes.
const DIR_MODE = 0o770;
const CREATE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL;

interface PublishFailure {
  code: Extract<ErrorCode, "publish_failed" | "disk_full">;
  detail: string;
}

type Published = Result<void, PublishFailure>;

/** Where a LoRA is published: `file`, whose folder lies inside the handoff root `root`. */
export interface PublishTarget {
  root: string;
  file: string;
}

/**
 * Where a run found after a restart publishes: output_dir resolved again, as its check did, when it still lies
 * inside the handoff root; else the path as sent, on which the publish then finds and names what changed.
 */
export function adoptedOutputFile(request: JobRequest, handoffRoot: string): string {
  const dir = resolveInside(request.output_dir, { paths: [handoffRoot], label: "the handoff root" }, true);
  return join(dir.ok ? dir.value : request.output_dir, `${request.output_name}.safetensors`);
}

// The name the LoRA is copied to before it is linked into place: hidden, and this job's own.
const partialName = (name: string, jobId: string) => `.${name}.${jobId}.partial`;

/**
 * Publishes `from` (verified with `sha256`) as `target.file`. An attempt cut short by a crash is finished by the
 * next: a target that already holds exactly these bytes counts as published.
 */
export async function publishLora(
  from: string,
  target: PublishTarget,
  sha256: string,
  jobId: string,
): Promise<Published> {
  const name = basename(target.file);
  const shown = `output_dir/${name}`;
  const partial = partialName(name, jobId);
  let dir: PinnedDir | null = null;
  try {
    dir = await pinChain(target.root, folderChain(target), DIR_MODE);
    return await publishIn(dir, from, { name, partial, shown }, sha256);
  } catch (err) {
    return fail(failureOf(err, shown));
  } finally {
    await dir?.handle.close();
  }
}

interface Names {
  name: string;
  partial: string;
  shown: string;
}

async function publishIn(dir: PinnedDir, from: string, names: Names, sha256: string): Promise<Published> {
  const { name, partial, shown } = names;
  const out = await createPartial(dir, partial, shown);
  try {
    const copied = await copySynced(from, out);
    if (copied !== sha256) {
      await unlink(dir.at(partial));
      const detail = `the LoRA changed after it was verified (sha256 ${copied}, verified ${sha256}); not published`;
      return fail({ code: "publish_failed", detail });
    }
    const linked = await linkInPlace(dir, names, sha256);
    if (linked.ok && linked.value === "linked") await sameFile(dir, name, out, shown);
    await unlink(dir.at(partial));
    if (!linked.ok) return linked;
  } catch (err) {
    // Only the worker's own file goes: one it found in the way was never opened for writing.
    await unlink(dir.at(partial)).catch(() => {});
    throw err;
  } finally {
    await out.close();
  }
  await dir.handle.sync();
  return ok(undefined);
}

// The hidden name is this job's: a regular file there is what a crash left of an earlier attempt and is
// replaced; anything else (a FIFO, a link, a folder) is not the worker's, and the publish stops.
async function createPartial(dir: PinnedDir, partial: string, shown: string): Promise<FileHandle> {
  try {
    return await openFileIn(dir, partial, CREATE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    const found = await lstat(dir.at(partial)).then(fileKind, () => "missing");
    if (found !== "a regular file") throw new InTheWay(partial, found, shown);
    await unlink(dir.at(partial));
    return openFileIn(dir, partial, CREATE);
  }
}

// "linked", or "there": the name already held these bytes (an earlier attempt linked it before a crash).
async function linkInPlace(
  dir: PinnedDir,
  names: Names,
  sha256: string,
): Promise<Result<"linked" | "there", PublishFailure>> {
  try {
    await link(dir.at(names.partial), dir.at(names.name));
    return ok("linked");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  }
  const found = await digestIn(dir, names.name);
  if (found === sha256) return ok("there");
  const what = typeof found === "object" ? ` (${found.kind})` : "";
  const detail =
    `${names.shown} appeared while the job ran${what}; it was not replaced, and the LoRA was not published`;
  return fail({ code: "publish_failed", detail });
}

// The name links to the file the worker wrote, not to one swapped in at the hidden name before the link.
async function sameFile(dir: PinnedDir, name: string, written: FileHandle, shown: string): Promise<void> {
  const placed = await openFileIn(dir, name, constants.O_RDONLY).catch((err) => {
    throw err instanceof NotAsExpected ? new Replaced(shown) : err;
  });
  try {
    const [a, b] = await Promise.all([placed.stat(), written.stat()]);
    if (a.dev !== b.dev || a.ino !== b.ino) throw new Replaced(shown);
  } finally {
    await placed.close();
  }
}

// The sha256 of a regular file at `name`; what it is when it is not one.
async function digestIn(dir: PinnedDir, name: string): Promise<string | { kind: string }> {
  let file: FileHandle;
  try {
    file = await openFileIn(dir, name, constants.O_RDONLY);
  } catch (err) {
    if (err instanceof NotAsExpected) return { kind: err.found };
    throw err;
  }
  try {
    return await pump(file, null);
  } finally {
    await file.close();
  }
}

// Copies the run's LoRA (opened without following a link) into `to`; the sha256 of what was written, synced.
async function copySynced(from: string, to: FileHandle): Promise<string> {
  const source = await open(from, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    if (!(await source.stat()).isFile()) throw new Error("the run's LoRA is not a regular file");
    const digest = await pump(source, to);
    await to.sync();
    return digest;
  } finally {
    await source.close();
  }
}

async function pump(source: FileHandle, to: FileHandle | null): Promise<string> {
  const hasher = new Bun.CryptoHasher("sha256");
  const buffer = Buffer.alloc(CHUNK_BYTES);
  for (;;) {
    const { bytesRead } = await source.read(buffer, 0, CHUNK_BYTES, null);
    if (bytesRead === 0) break;
    const chunk = buffer.subarray(0, bytesRead);
    hasher.update(chunk);
    await to?.write(chunk);
  }
  return hasher.digest("hex");
}

// The folders from the handoff root down to output_dir. The target is inside the root as configured, or as
// resolved (a fresh job's output_dir is the real path its check found).
function folderChain(target: PublishTarget): string[] {
  const dir = dirname(target.file);
  for (const root of [target.root, realpathSync(target.root)]) {
    if (isStrictlyInside(root, dir)) return relative(root, dir).split(sep);
  }
  throw new Error("output_dir is not inside the handoff root");
}

class InTheWay extends Error {
  constructor(readonly partial: string, readonly found: string, readonly shown: string) {
    super(`output_dir/${partial}, the name ${shown} is written under before it is linked into place, is ${found}`);
  }
}

class Replaced extends Error {
  constructor(readonly shown: string) {
    super(`${shown} was replaced while it was being published`);
  }
}

function failureOf(err: unknown, shown: string): PublishFailure {
  if (err instanceof NotAsExpected) {
    const detail = `${err.rel} in the handoff root, on the way to output_dir, is ${err.found} now, not the folder ` +
      "that was checked; the LoRA was not published";
    return { code: "publish_failed", detail };
  }
  if (err instanceof InTheWay || err instanceof Replaced) {
    return { code: "publish_failed", detail: `${err.message}; the LoRA was not published` };
  }
  const cause = err as NodeJS.ErrnoException;
  const detail = `the LoRA could not be written to ${shown}: ${withoutPaths(cause)}`;
  return { code: cause.code === "ENOSPC" ? "disk_full" : "publish_failed", detail };
}

// A system error's message names the path it failed on; the record says which file in words instead.
function withoutPaths(err: NodeJS.ErrnoException): string {
  return err.code ?? err.message.replace(/'[^']*'/g, "").trim();
}
