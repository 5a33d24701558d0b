import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { DatasetReport } from "../job.ts";
import { checkRequest, everyFault } from "../request/check.ts";
import { readTrain } from "../request/read-train.ts";
import { type DetailItem, fieldError } from "../request/schema.ts";
import { fail, ok, type Result } from "../result.ts";
import type { DispatchContext } from "./context.ts";
import { identityBeforeClaim } from "./identity-gate.ts";
import { freshOrigin } from "./origin.ts";
import type { DispatchRefusal } from "./refusal.ts";

// Where a check's copy is prepared, inside the state dir (the disk the jobs' copies use), and removed after.
const CHECKS_DIR = "dataset-checks";

/**
 * POST /dataset/check: a train request's dataset prepared as POST /train would prepare it (the same checks and
 * 422s, the same copy, notes and identity) into a scratch copy that is removed after, with no row, no job
 * directory, no GPU. One at a time: the scorer and the copy are the costly part, and a second waits its turn.
 */
export function createDatasetCheck(ctx: DispatchContext) {
  // What a worker that stopped mid-check left; the state dir's instance lock makes it no other worker's.
  rmSync(join(ctx.config.state_dir, CHECKS_DIR), { recursive: true, force: true });
  let running = false;
  return async (body: unknown, faults: readonly DetailItem[]): Promise<Result<DatasetReport, DispatchRefusal>> => {
    const read = readTrain(body, faults);
    if (read.request === null) return fail({ kind: "invalid", detail: await everyFault(read, ctx.config) });
    if (running) return fail({ kind: "check_busy" });
    running = true;
    try {
      const checked = await checkRequest(read.request, ctx.config);
      if (!checked.ok) return checked;
      const identity = await identityBeforeClaim(ctx, checked.value);
      if (!identity.ok) return identity;
      const origin = await freshOrigin(checked.value, ctx.captionTokensOf, ctx.scorer, identity.value);
      const scratch = join(ctx.config.state_dir, CHECKS_DIR, randomUUID());
      await mkdir(scratch, { recursive: true, mode: 0o750 });
      try {
        const filled = await origin.fill(scratch, new AbortController().signal);
        if (filled.ok) return ok(filled.value!.report!);
        const { error_code: code, error } = filled.error;
        const msg = `${code ?? "failed"}: ${error ?? "the copy could not be prepared"}`;
        return fail({ kind: "invalid", detail: [fieldError("dataset_dir", msg, "dataset_unreadable")] });
      } finally {
        await rm(scratch, { recursive: true, force: true });
      }
    } finally {
      running = false;
    }
  };
}
