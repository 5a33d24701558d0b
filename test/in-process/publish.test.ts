import { describe, expect, test } from "bun:test";
import { constants, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { publishLora } from "../../src/supervisor/publish.ts";
import { within } from "../support/wait.ts";

// Issue 35 §2: the publish into arbo's output_dir, with arbo laying FIFOs and links in the handoff root after the
// request was checked. Real folders, real FIFOs (mkfifo), real links; publishLora as the run calls it.

const JOB = "0b3c5a8e-1111-4111-8111-123456789abc";
const LORA = "the trained LoRA's bytes";
const SHA = new Bun.CryptoHasher("sha256").update(LORA).digest("hex");
// Long enough for a blocked open to show, short enough for the suite.
const HANG_MS = 1_000;

interface Scene extends Disposable {
  root: string;
  handoff: string;
  outDir: string;
  target: string;
  publish(): ReturnType<typeof publishLora>;
}

function scene(): Scene {
  const root = mkdtempSync(join(tmpdir(), "lora-worker-publish-"));
  const handoff = join(root, "handoff");
  const outDir = join(handoff, "job1", "out");
  mkdirSync(join(handoff, "job1"), { recursive: true });
  const run = join(root, "run.safetensors");
  writeFileSync(run, LORA);
  const target = join(outDir, "mylora.safetensors");
  return {
    root, handoff, outDir, target,
    publish: () => publishLora(run, { root: handoff, file: target }, SHA, JOB),
    [Symbol.dispose]: () => rmSync(root, { recursive: true, force: true }),
  };
}

const mkfifo = (path: string) => expect(Bun.spawnSync(["mkfifo", path]).exitCode).toBe(0);
const partialOf = (s: Scene) => join(s.outDir, `.mylora.safetensors.${JOB}.partial`);

describe("the publish opens nothing in the handoff root that can block it", () => {
  test("a FIFO at the output's name fails publish_failed at once, and is left as it is", async () => {
    using s = scene();
    mkdirSync(s.outDir);
    mkfifo(s.target);
    expect(await within(s.publish(), 10_000)).toEqual({
      ok: false,
      error: {
        code: "publish_failed",
        detail: "output_dir/mylora.safetensors appeared while the job ran (a FIFO); it was not replaced, and the LoRA was not published",
      },
    });
    expect(readdirSync(s.outDir)).toEqual(["mylora.safetensors"]);
  });

  test("contrast: an open of that FIFO that follows no link but waits for a writer blocks", async () => {
    using s = scene();
    mkdirSync(s.outDir);
    mkfifo(s.target);
    const opening = open(s.target, constants.O_RDONLY | constants.O_NOFOLLOW);
    expect(await within(opening, HANG_MS)).toBe("deadline");
    // A writer releases it, so no thread is left blocked.
    const writer = await open(s.target, constants.O_WRONLY);
    await (await opening).close();
    await writer.close();
  });

  test("a FIFO at the publish's temporary name fails publish_failed naming it, and the output is not written", async () => {
    using s = scene();
    mkdirSync(s.outDir);
    mkfifo(partialOf(s));
    expect(await within(s.publish(), 10_000)).toEqual({
      ok: false,
      error: {
        code: "publish_failed",
        detail: `output_dir/.mylora.safetensors.${JOB}.partial, the name output_dir/mylora.safetensors is written under ` +
          "before it is linked into place, is a FIFO; the LoRA was not published",
      },
    });
    expect(readdirSync(s.outDir)).toEqual([`.mylora.safetensors.${JOB}.partial`]);
  });

  test("a regular file left at the temporary name (a crash midway) is replaced, and the LoRA published", async () => {
    using s = scene();
    mkdirSync(s.outDir);
    writeFileSync(partialOf(s), "half a copy");
    expect(await s.publish()).toEqual({ ok: true, value: undefined });
    expect(readFileSync(s.target, "utf8")).toBe(LORA);
    expect(readdirSync(s.outDir)).toEqual(["mylora.safetensors"]);
  });
});

describe("the publish never leaves the handoff root", () => {
  const swaps: Array<[string, (s: Scene, outside: string) => void, string]> = [
    ["output_dir replaced by a link out of the root", (s, outside) => (mkdirSync(outside), symlinkSync(outside, s.outDir)), "job1/out in the handoff root, on the way to output_dir, is a symbolic link now"],
    ["a folder above output_dir replaced by a link out of the root", (s, outside) => {
      renameSync(join(s.handoff, "job1"), outside);
      symlinkSync(outside, join(s.handoff, "job1"));
    }, "job1 in the handoff root, on the way to output_dir, is a symbolic link now"],
    ["output_dir replaced by a FIFO", (s) => mkfifo(s.outDir), "job1/out in the handoff root, on the way to output_dir, is a FIFO now"],
  ];
  for (const [name, swap, said] of swaps) {
    test(`${name}: publish_failed naming it, nothing written outside`, async () => {
      using s = scene();
      const outside = join(s.root, "outside");
      swap(s, outside);
      const published = await within(s.publish(), 10_000);
      expect(published).toEqual({
        ok: false,
        error: { code: "publish_failed", detail: `${said}, not the folder that was checked; the LoRA was not published` },
      });
      expect(existsSync(join(outside, "out"))).toBe(false);
      expect(existsSync(join(outside, "mylora.safetensors"))).toBe(false);
    });
  }

  test("contrast: the same tree untouched publishes, creating output_dir, with no temporary name left", async () => {
    using s = scene();
    expect(await s.publish()).toEqual({ ok: true, value: undefined });
    expect(readFileSync(s.target, "utf8")).toBe(LORA);
    expect(readdirSync(s.outDir)).toEqual(["mylora.safetensors"]);
  });

  test("contrast: a publish repeated after it was done (a crash before the record) counts as published", async () => {
    using s = scene();
    expect(await s.publish()).toEqual({ ok: true, value: undefined });
    expect(await s.publish()).toEqual({ ok: true, value: undefined });
    expect(readdirSync(s.outDir)).toEqual(["mylora.safetensors"]);
  });
});
