import { describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { importTokenizers } from "../../src/tokenizers/import.ts";
import { TOKENIZERS, tokenizersProblems, watchTokenizers } from "../../src/tokenizers/layout.ts";
import { FAKE_NVIDIA_SMI, MAIN, makeHostTree } from "../support/host-tree.ts";
import { writeExecutable } from "../support/scratch-files.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";
import { writeHubCache, writeTokenizerFolder, writeTokenizers } from "../support/tokenizers.ts";

const [CLIP_L, CLIP_G] = TOKENIZERS;

function scratch(): { dir: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-tokenizers-"));
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

const MAKE_TOKENIZERS = join(import.meta.dir, "..", "..", "scripts", "real-trainer", "make-tokenizers.py");

describe.skipIf(!Bun.which("python3"))("the real-trainer harness's tokenizers (make-tokenizers.py)", () => {
  test("are CLIP's exactly, as pinned; with two of their merges swapped, refused at the first line", () => {
    using s = scratch();
    const made = Bun.spawnSync(["python3", MAKE_TOKENIZERS, s.dir], { stderr: "pipe" });
    expect(made.exitCode).toBe(0);
    expect(tokenizersProblems(s.dir)).toEqual([]);
    // Contrast: the same folder with its last two merges swapped (vocab.json unchanged) is not CLIP's.
    const merges = join(s.dir, CLIP_G!.folder, "merges.txt");
    const lines = readFileSync(merges, "utf8").trimEnd().split("\n");
    [lines[48893], lines[48894]] = [lines[48894]!, lines[48893]!];
    writeFileSync(merges, `${lines.join("\n")}\n`);
    expect(tokenizersProblems(s.dir)).toEqual([
      `${CLIP_G!.folder}/merges.txt line 48894: ${JSON.stringify(lines[48893])} where CLIP has ${JSON.stringify(lines[48894])}`,
    ]);
  });
});

describe("importTokenizers", () => {
  test("copies both from folders in --tokenizer_cache_dir's layout, and the copies are ready", () => {
    using s = scratch();
    const source = writeTokenizers(join(s.dir, "from"));
    const dest = join(s.dir, "to");
    expect(tokenizersProblems(dest)).toHaveLength(2); // contrast: nothing there yet
    const result = importTokenizers(source, dest);
    expect(result).toEqual({
      ok: true,
      value: TOKENIZERS.map((t) => ({ id: t.id, from: join(source, t.folder), to: join(dest, t.folder) })),
    });
    expect(tokenizersProblems(dest)).toEqual([]);
    expect(readdirSync(dest).sort()).toEqual(TOKENIZERS.map((t) => t.folder).sort());
  });

  test("takes them from a Hugging Face cache, as files, not as links into its blobs", () => {
    using s = scratch();
    const home = writeHubCache(join(s.dir, "hf-home"));
    const dest = join(s.dir, "to");
    for (const source of [home, join(home, "hub")]) {
      const result = importTokenizers(source, dest);
      expect(result.ok).toBe(true);
      const vocab = join(dest, CLIP_G!.folder, "vocab.json");
      expect(lstatSync(vocab).isFile()).toBe(true);
      expect(statSync(vocab).mode & 0o777).toBe(0o644);
      expect(tokenizersProblems(dest)).toEqual([]);
    }
    const snapshotVocab = join(home, "hub", "models--openai--clip-vit-large-patch14", "snapshots", "0123abcd", "vocab.json");
    expect(lstatSync(snapshotVocab).isSymbolicLink()).toBe(true);
  });

  test("with one of the two missing, imports nothing and names the one missing", () => {
    using s = scratch();
    const source = join(s.dir, "from");
    writeTokenizerFolder(join(source, CLIP_L!.folder));
    const dest = join(s.dir, "to");
    const result = importTokenizers(source, dest);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toEqual([
      `tokenizer ${CLIP_G!.id} is not in ${source} (looked for ${CLIP_G!.folder}/, ` +
        "models--laion--CLIP-ViT-bigG-14-laion2B-39B-b160k/snapshots/ or hub/models--…)",
    ]);
    expect(existsSync(dest)).toBe(false);
  });

  test("a model_max_length other than CLIP's 77, or a missing merges.txt, is named", () => {
    using s = scratch();
    const dir = writeTokenizers(join(s.dir, "tk"));
    writeTokenizerFolder(join(dir, CLIP_L!.folder), { maxLength: 1024 });
    rmSync(join(dir, CLIP_G!.folder, "merges.txt"));
    expect(tokenizersProblems(dir)).toEqual([
      `${CLIP_L!.folder}/tokenizer_config.json says model_max_length 1024, not CLIP's 77`,
      `${CLIP_G!.folder}/merges.txt is missing`,
    ]);
  });

  test("importing again replaces the folders whole, leaving no temporary folder behind", () => {
    using s = scratch();
    const dest = join(s.dir, "to");
    importTokenizers(writeTokenizers(join(s.dir, "one")), dest);
    writeFileSync(join(dest, CLIP_L!.folder, "stray.txt"), "left from before");
    const source = writeTokenizers(join(s.dir, "two"));
    writeFileSync(join(source, CLIP_L!.folder, "tokenizer.json"), "{}");
    expect(importTokenizers(source, dest).ok).toBe(true);
    expect(readdirSync(dest).sort()).toEqual(TOKENIZERS.map((t) => t.folder).sort());
    expect(readdirSync(join(dest, CLIP_L!.folder)).sort()).toEqual(
      ["merges.txt", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.json"],
    );
  });
});

describe("watchTokenizers", () => {
  test("sees an import made while it watches, and a file removed after it", () => {
    using s = scratch();
    const dir = join(s.dir, "tk");
    const readiness = watchTokenizers(dir);
    expect(readiness()).toMatchObject({ dir, ready: false });
    writeTokenizers(dir);
    expect(readiness()).toEqual({ dir, ready: true, problems: [] });
    rmSync(join(dir, CLIP_G!.folder, "vocab.json"));
    expect(readiness()).toEqual({ dir, ready: false, problems: [`${CLIP_G!.folder}/vocab.json is missing`] });
  });
});

describe("lora-worker tokenizers", () => {
  async function cli(args: string[]) {
    const proc = Bun.spawn([process.execPath, MAIN, "tokenizers", ...args], {
      stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! },
    });
    const [code, stdout, stderr] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    return { code, stdout, stderr };
  }

  test("check fails naming the fix until import fills trainer.tokenizer_dir, then passes", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig('[trainer]\nmode = "simulate"\n');
    const dir = join(tree.state, "tokenizers");
    const before = await cli(["check", "--config", config]);
    expect(before.code).toBe(1);
    expect(before.stderr).toContain(`tokenizers not ready in ${dir}:\n  - ${CLIP_L!.folder} is missing`);
    expect(before.stderr).toContain("fix: lora-worker tokenizers write (from the CLIP merges this program carries), or lora-worker tokenizers import PATH");
    const source = writeHubCache(join(tree.root, "hf-home"));
    const imported = await cli(["import", "--config", config, source]);
    expect(imported).toEqual({
      code: 0,
      stdout: TOKENIZERS.map((t) => {
        const from = join(source, "hub", `models--${t.id.replace("/", "--")}`, "snapshots", "0123abcd");
        return `imported ${t.id}: ${from} -> ${join(dir, t.folder)}\n`;
      }).join(""),
      stderr: "",
    });
    const after = await cli(["check", "--config", config]);
    expect(after).toEqual({ code: 0, stdout: `tokenizers ready in ${dir}: ${TOKENIZERS.map((t) => t.id).join(", ")}\n`, stderr: "" });
  });

  test("an import from a folder without them exits 1 and writes nothing", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig('[trainer]\nmode = "simulate"\n');
    const result = await cli(["import", "--config", config, tree.root]);
    expect(result.code).toBe(1);
    expect(result.stderr).toStartWith(`tokenizers: nothing imported into ${join(tree.state, "tokenizers")}:\n`);
    expect(existsSync(join(tree.state, "tokenizers"))).toBe(false);
  });

  test("a missing action or path is a usage error (exit 2)", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig('[trainer]\nmode = "simulate"\n');
    for (const args of [[], ["import", "--config", config], ["fetch", "--config", config], ["write", "x", "--config", config]]) {
      const result = await cli(args);
      expect(result.code).toBe(2);
      expect(result.stderr).toStartWith("lora-worker tokenizers: tokenizers takes `write`, `import PATH` or `check`");
      expect(result.stderr.split("\n")).toHaveLength(3);
    }
  });
});

describe("a real-mode worker's start-up", () => {
  // A worker's log up to its first GPU probe: every line of its start-up is in it.
  async function startUpLog(tokenizers: boolean): Promise<string> {
    using tree = makeHostTree();
    const accelerate = writeExecutable(join(tree.root, "accelerate"), "#!/bin/sh\n");
    mkdirSync(join(tree.root, "sd-scripts"));
    writeFileSync(join(tree.root, "sd-scripts", "sdxl_train_network.py"), "");
    if (tokenizers) writeTokenizers(join(tree.state, "tokenizers"));
    const trainer = `[trainer]\nmode = "real"\naccelerate = "${accelerate}"\nsd_scripts_dir = "${join(tree.root, "sd-scripts")}"`;
    const config = tree.writeConfig(`${trainer}\n[auth]\nmode = "none"\n[gpu]\nnvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}\n`);
    await using worker = await startWorker(config);
    // The first GPU probe answers after every line start-up writes at once, so its line comes after them.
    return await waitFor(() => (worker.output().includes('"msg":"gpu probe"') ? worker.output() : null), "the probe");
  }

  test("warns that every real run will fail while the tokenizers are missing, naming the import", async () => {
    const log = await startUpLog(false);
    expect(log).toContain('"msg":"the CLIP tokenizers are not ready in ');
    expect(log).toContain("every real run will fail (tokenizer_missing)");
    expect(log).toContain('"fix":"lora-worker tokenizers write, or tokenizers import PATH, then lora-worker doctor"');
  });

  test("contrast: says nothing of them once they are imported", async () => {
    const log = await startUpLog(true);
    expect(log).toContain('"msg":"gpu probe"');
    expect(log).not.toContain("tokenizers are not ready");
  });
});
