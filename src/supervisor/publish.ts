import { constants } from "node:fs";
import { link, mkdir, open, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import type { ErrorCode } from "../job.ts";
import { digestOf } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";

// The trainer writes into the job's private run directory; arbo's output_dir only ever receives the final LoRA,
// whole and verified: copied to a hidden name beside its place, synced, checked against the digest the worker
// verified, then linked into place. A link never replaces a file, so an output that appeared meanwhile is kept
// as it is (the 409 output_exists of the request, held to the last moment).

const CHUNK_BYTES = 1024 * 1024;
const NO_FOLLOW = constants.O_NOFOLLOW;

interface PublishFailure {
  code: Extract<ErrorCode, "publish_failed" | "disk_full">;
  detail: string;
}

// The name the LoRA is copied to before it is linked into place: hidden, and this job's own.
const publishingPath = (target: string, jobId: string) =>
  join(dirname(target), `.${basename(target)}.${jobId}.partial`);

/**
 * Publishes `from` (verified with `sha256`) as `target`. An attempt cut short by a crash is finished by the next:
 * a target that already holds exactly these bytes counts as published.
 */
export async function publishLora(
  from: string,
  target: string,
  sha256: string,
  jobId: string,
): Promise<Result<void, PublishFailure>> {
  const shown = `output_dir/${basename(target)}`;
  const partial = publishingPath(target, jobId);
  try {
    await mkdir(dirname(target), { recursive: true, mode: 0o770 });
    const copied = await copySynced(from, partial);
    if (copied !== sha256) {
      await rm(partial, { force: true });
      const detail = `the LoRA changed after it was verified (sha256 ${copied}, verified ${sha256}); not published`;
      return fail({ code: "publish_failed", detail });
    }
    try {
      await link(partial, target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if ((await digestOf(target)) !== sha256) {
        await rm(partial, { force: true });
        const detail = `${shown} appeared while the job ran; it was not replaced, and the LoRA was not published`;
        return fail({ code: "publish_failed", detail });
      }
    }
    await rm(partial, { force: true });
    await syncDir(dirname(target));
    return ok(undefined);
  } catch (err) {
    await rm(partial, { force: true }).catch(() => {});
    const cause = err as NodeJS.ErrnoException;
    const detail = `the LoRA could not be written to ${shown}: ${withoutPaths(cause)}`;
    return fail({ code: cause.code === "ENOSPC" ? "disk_full" : "publish_failed", detail });
  }
}

// Copies without following a link at either end; returns the sha256 of what was written, after an fsync.
async function copySynced(from: string, to: string): Promise<string> {
  const source = await open(from, constants.O_RDONLY | NO_FOLLOW);
  try {
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | NO_FOLLOW;
    const target = await open(to, flags, 0o640);
    try {
      const hasher = new Bun.CryptoHasher("sha256");
      const buffer = Buffer.alloc(CHUNK_BYTES);
      for (;;) {
        const { bytesRead } = await source.read(buffer, 0, CHUNK_BYTES, null);
        if (bytesRead === 0) break;
        const chunk = buffer.subarray(0, bytesRead);
        hasher.update(chunk);
        await target.write(chunk);
      }
      await target.sync();
      return hasher.digest("hex");
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

// A system error's message names the path it failed on; the record says which file in words instead.
function withoutPaths(err: NodeJS.ErrnoException): string {
  return err.code ?? err.message.replace(/'[^']*'/g, "").trim();
}
