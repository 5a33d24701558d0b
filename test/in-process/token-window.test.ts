import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { untilEnded } from "../support/jobs.ts";

// The context a job trains on, chosen from its captions at preparation: in its argv, its record and the header of
// the LoRA the (simulated) trainer writes, and kept by a resume of it.
const TIMEOUT_MS = 60_000;

function appFor(tree: HostTree) {
  // The run fails at step 60, after its state of step 40: resumable.
  const a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0, fail: "exit@60:1" }), SIMULATOR);
  const post = (path: string, body?: unknown) =>
    a.json(path, { method: "POST", ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }) });
  const argvOf = async (id: string): Promise<string[]> =>
    (await Bun.file(join(tree.state, "jobs", id, "launch.json")).json()).argv;
  const contextFlags = async (id: string) => (await argvOf(id)).filter((flag) => flag.startsWith("--max_token_length"));
  return { ...a, post, contextFlags, ended: (id: string) => untilEnded(a, id, 15_000) };
}

// By the bound the worker counts with where no tokenizer is imported: one token per letter.
const wordsOf = (n: number) => Array.from({ length: n }, () => "a").join(" ");

async function failedThenResumed(tree: HostTree, caption: string) {
  writeFileSync(join(tree.dataset, "img0.txt"), caption);
  await using a = appFor(tree);
  const { body } = await a.post("/train", tree.validRequest());
  const failed = await a.ended(body.worker_job_id);
  expect(failed).toMatchObject({ status: "failed", resume_step: 40 });
  // The header of the LoRA saved beside the state, as sd-scripts writes ss_max_token_length (str(None) unset).
  const lora = join(tree.state, "jobs", failed.worker_job_id, "run", "mylora-step00000040.safetensors");
  const verdict = await verifySafetensors(lora);
  if (!verdict.ok) throw new Error(verdict.error.detail);
  const resumed = await a.post(`/train/${failed.worker_job_id}/resume`);
  expect(resumed.status).toBe(200);
  const final = await a.ended(resumed.body.worker_job_id);
  return {
    failed, final, header: verdict.value.metadata.ss_max_token_length,
    flags: [await a.contextFlags(failed.worker_job_id), await a.contextFlags(final.worker_job_id)],
  };
}

describe("the context a job trains on", () => {
  test("a caption over 75 tokens trains on 150, named in the record and the LoRA's header, and its resume keeps it", async () => {
    using tree = makeHostTree();
    const { failed, final, flags, header } = await failedThenResumed(tree, `ohwx ${wordsOf(100)}`);
    expect(failed.dataset.prepared.token_window).toEqual({ tokens: 150, longest: { caption: "img0.txt", tokens: 104 } });
    expect(header).toBe("150");
    // The resume reads the same copy, and trains it on the same context.
    expect(final.resumed_from).toBe(failed.worker_job_id);
    expect(flags).toEqual([["--max_token_length=150"], ["--max_token_length=150"]]);
  }, TIMEOUT_MS);

  test("contrast: short captions train on one window, passed as no flag, before and after a resume", async () => {
    using tree = makeHostTree();
    const { failed, flags, header } = await failedThenResumed(tree, "ohwx, a man smiling");
    expect(failed.dataset.prepared.token_window.tokens).toBe(75);
    expect(header).toBe("None");
    expect(flags).toEqual([[], []]);
  }, TIMEOUT_MS);
});
