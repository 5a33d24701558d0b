import { describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TOKENIZERS } from "../../src/tokenizers/layout.ts";
import { ensureBinary } from "../support/binary.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { writeExecutable } from "../support/scratch-files.ts";
import { CLIP_MERGES, CLIP_VOCAB, runTokenizers, writeTokenizers } from "../support/tokenizers.ts";
import { startWorker } from "../support/worker-process.ts";

const binary = ensureBinary();
const [CLIP_L, CLIP_G] = TOKENIZERS;

const tokenizers = (...args: string[]) => runTokenizers([binary], args);

describe("the compiled binary's tokenizers", () => {
  test("import refuses a cut merges.txt and a link out of the source, takes the whole folder, and /healthz follows the files' content", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(SIMULATE_TABLES(0.01));
    const dir = join(tree.state, "tokenizers");
    const source = writeTokenizers(join(tree.root, "from"));
    const merges = join(source, CLIP_G!.folder, "merges.txt");
    writeFileSync(merges, CLIP_MERGES.slice(0, 300_000));
    const cut = await tokenizers("import", "--config", config, source);
    expect(cut.code).toBe(1);
    expect(cut.stderr).toEndWith("merges.txt holds 29418 merges after its #version line, not CLIP's 48894 (cut short?)\n");
    writeFileSync(join(tree.root, "merges.txt"), CLIP_MERGES);
    rmSync(merges);
    symlinkSync(join(tree.root, "merges.txt"), merges);
    const linked = await tokenizers("import", "--config", config, source);
    expect(linked.code).toBe(1);
    expect(linked.stderr).toEndWith(`${merges} leads out of ${source}, to ${join(tree.root, "merges.txt")}\n`);
    expect(existsSync(dir)).toBe(false);
    rmSync(merges);
    writeFileSync(merges, CLIP_MERGES);
    expect(await tokenizers("import", "--config", config, source)).toMatchObject({ code: 0, stderr: "" });
    expect(lstatSync(join(dir, CLIP_G!.folder, "merges.txt")).isFile()).toBe(true);

    // /healthz judges the tokenizers for a real trainer only (a simulated one loads none): a real-mode worker, whose
    // trainer never runs here.
    const accelerate = writeExecutable(join(tree.root, "accelerate"), "#!/bin/sh\n");
    mkdirSync(join(tree.root, "sd-scripts"));
    writeFileSync(join(tree.root, "sd-scripts", "sdxl_train_network.py"), "");
    const real = tree.writeConfig(
      `[trainer]\nmode = "real"\naccelerate = "${accelerate}"\nsd_scripts_dir = "${join(tree.root, "sd-scripts")}"\n` +
        `[gpu]\nnvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}\n`,
    );
    await using worker = await startWorker(real, { command: [binary] });
    const readiness = async () => ((await (await fetch(`${worker.url}/healthz`)).json()) as any).tokenizers;
    expect(await readiness()).toEqual({ dir, ready: true, problems: [] });
    writeFileSync(join(dir, CLIP_L!.folder, "merges.txt"), "");
    expect(await readiness()).toMatchObject({ ready: false, problems: [`${CLIP_L!.folder}/merges.txt does not begin with its #version line, so its first merge is lost`] });
    expect((await tokenizers("check", "--config", real)).code).toBe(1);
  }, 60_000);

  test("on a fresh install, before the trainer's paths exist, check and import run; a broken tokenizer_dir is refused naming it and the fix", async () => {
    using tree = makeHostTree();
    const missing = `[trainer]\naccelerate = "${join(tree.root, "venv/bin/accelerate")}"\nsd_scripts_dir = "${join(tree.root, "sd-scripts")}"\n`;
    const config = tree.writeConfig(missing);
    const dir = join(tree.state, "tokenizers");
    const unready = await tokenizers("check", "--config", config);
    expect(unready.code).toBe(1);
    expect(unready.stderr).toStartWith(`tokenizers not ready in ${dir}:\n`);
    const source = writeTokenizers(join(tree.root, "from"));
    expect(await tokenizers("import", "--config", config, source)).toMatchObject({ code: 0, stderr: "" });
    expect(await tokenizers("check", "--config", config)).toMatchObject({ code: 0, stdout: expect.stringContaining(`tokenizers ready in ${dir}`) });
    // Contrast: serve, which needs them, still refuses the same config for its trainer's paths.
    const served = Bun.spawnSync([binary, "serve", "--config", config], { env: { PATH: process.env.PATH! } });
    expect(served.exitCode).toBe(78);
    expect(served.stderr.toString()).toContain(`trainer.accelerate: ${join(tree.root, "venv/bin/accelerate")} does not exist`);

    const template = "`lora-worker config template` gives each key's meaning and default";
    const relative = tree.writeConfig(`${missing}tokenizer_dir = "tokenizers"\n`);
    expect(await tokenizers("check", "--config", relative)).toEqual({
      code: 78, stdout: "",
      stderr: `tokenizers: the config ${relative} is invalid: trainer.tokenizer_dir: must be an absolute path\n` +
        `fix: correct trainer.tokenizer_dir in ${relative} (${template})\n`,
    });
    const file = join(tree.root, "a-file");
    writeFileSync(file, "");
    const notFolder = tree.writeConfig(`${missing}tokenizer_dir = "${file}"\n`);
    expect(await tokenizers("import", "--config", notFolder, source)).toEqual({
      code: 78, stdout: "",
      stderr: `tokenizers: the config ${notFolder} is invalid: trainer.tokenizer_dir: ${file} is not a directory\n` +
        `fix: set trainer.tokenizer_dir in ${notFolder} to a folder for the tokenizers, or leave it out for ` +
        "<state_dir>/tokenizers (its parent must exist)\n",
    });
  }, 60_000);

  test("write puts both tokenizers from the binary into tokenizer_dir and check says ready; a ready folder is left, a corrupted one replaced", async () => {
    using tree = makeHostTree();
    const dir = join(tree.root, "tokenizers");
    const config = tree.writeConfig(`[trainer]\naccelerate = "${join(tree.root, "absent")}"\ntokenizer_dir = "${dir}"\n`);
    const folders = TOKENIZERS.map((t) => join(dir, t.folder));
    const ready = `tokenizers ready in ${dir}: ${TOKENIZERS.map((t) => t.id).join(", ")}\n`;
    const written = await tokenizers("write", "--config", config);
    expect(written).toEqual({
      code: 0, stderr: "", stdout: `${TOKENIZERS.map((t, i) => `wrote ${t.id}: ${folders[i]}\n`).join("")}${ready}`,
    });
    expect(await tokenizers("check", "--config", config)).toEqual({ code: 0, stderr: "", stdout: ready });
    for (const folder of folders) {
      expect(readdirSync(folder).sort()).toEqual(["merges.txt", "special_tokens_map.json", "tokenizer_config.json", "vocab.json"]);
      expect(readFileSync(join(folder, "merges.txt"), "utf8")).toBe(CLIP_MERGES);
      expect(JSON.parse(readFileSync(join(folder, "vocab.json"), "utf8"))).toEqual(JSON.parse(CLIP_VOCAB));
    }
    expect(readdirSync(dir).sort()).toEqual(TOKENIZERS.map((t) => t.folder).sort());

    const before = statSync(join(folders[0]!, "vocab.json"));
    const [badFolder, badSpec] = [folders[1]!, CLIP_G!];
    writeFileSync(join(badFolder, "merges.txt"), CLIP_MERGES.replace("#version: 0.2\n", ""));
    const broken = `${badSpec.folder}/merges.txt does not begin with its #version line, so its first merge is lost`;
    expect(await tokenizers("check", "--config", config)).toMatchObject({ code: 1, stderr: expect.stringContaining(broken) });
    expect(await tokenizers("write", "--config", config)).toEqual({
      code: 0, stderr: "",
      stdout: `left ${CLIP_L!.id} as it is: ${folders[0]} is ready\nreplaced ${badSpec.id}: ${badFolder}, which was not ready (${broken})\n${ready}`,
    });
    expect(statSync(join(folders[0]!, "vocab.json"))).toMatchObject({ ino: before.ino, mtimeMs: before.mtimeMs });
    expect(readFileSync(join(badFolder, "merges.txt"), "utf8")).toBe(CLIP_MERGES);
  }, 60_000);

  test("a write that cannot finish leaves no folder and says what failed", async () => {
    using tree = makeHostTree();
    const dir = join(tree.root, "tokenizers");
    const config = tree.writeConfig(`[trainer]\ntokenizer_dir = "${dir}"\n`);
    const capped = await runTokenizers([binary], ["write", "--config", config], 600_000);
    expect(capped.code).toBe(1);
    expect(capped.stderr).toStartWith(`tokenizers: nothing written into ${dir}: writing ${join(dir, CLIP_L!.folder)}.import-`);
    expect(existsSync(dir)).toBe(false);
    expect((await tokenizers("write", "--config", config)).code).toBe(0);
  }, 60_000);
});
