import { describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TOKENIZERS } from "../../src/tokenizers/layout.ts";
import { MAIN, makeHostTree, type HostTree } from "../support/host-tree.ts";
import {
  CLIP_MERGES, CLIP_VOCAB, filesUnder, runTokenizers, secondImport, swappedMerges, writeTokenizerFolder, writeTokenizers,
} from "../support/tokenizers.ts";

const [CLIP_L, CLIP_G] = TOKENIZERS;
const CUT_MERGES = CLIP_MERGES.slice(0, 300_000);
// Above every file of a compact tokenizer, below CLIP's vocab.json written one token a line.
const FILE_SIZE_LIMIT = 900_000;

const tokenizers = (args: string[], limit?: number) => runTokenizers([process.execPath, MAIN], args, limit);

function host(): HostTree & { config: string; dir: string } {
  const tree = makeHostTree();
  return Object.assign(tree, { config: tree.writeConfig('[trainer]\nmode = "simulate"\n'), dir: join(tree.state, "tokenizers") });
}

describe("tokenizers import checks what the trainer will read", () => {
  test("a cut merges.txt is refused in one line and nothing is written; the whole one is imported", async () => {
    using h = host();
    const source = writeTokenizers(join(h.root, "from"));
    writeFileSync(join(source, CLIP_G!.folder, "merges.txt"), CUT_MERGES);
    const cut = await tokenizers(["import", "--config", h.config, source]);
    expect(cut).toEqual({
      code: 1,
      stdout: "",
      stderr: `tokenizers: nothing imported into ${h.dir}: tokenizer ${CLIP_G!.id} in ${join(source, CLIP_G!.folder)} is not usable: ` +
        `${CLIP_G!.folder}/merges.txt holds 29418 merges after its #version line, not CLIP's 48894 (cut short?)\n`,
    });
    expect(existsSync(h.dir)).toBe(false);
    writeFileSync(join(source, CLIP_G!.folder, "merges.txt"), CLIP_MERGES);
    expect((await tokenizers(["import", "--config", h.config, source])).code).toBe(0);
    expect((await tokenizers(["check", "--config", h.config])).code).toBe(0);
  });

  test("two merges swapped, vocab.json rebuilt to agree, are refused naming the line and CLIP's merge; swapped back, imported", async () => {
    using h = host();
    const source = writeTokenizers(join(h.root, "from"));
    const [header, ...clip] = CLIP_MERGES.split("\n");
    writeTokenizerFolder(join(source, CLIP_L!.folder), swappedMerges(40001));
    const swapped = await tokenizers(["import", "--config", h.config, source]);
    expect(header).toBe("#version: 0.2");
    expect(swapped).toEqual({
      code: 1,
      stdout: "",
      stderr: `tokenizers: nothing imported into ${h.dir}: tokenizer ${CLIP_L!.id} in ${join(source, CLIP_L!.folder)} is not usable: ` +
        `${CLIP_L!.folder}/merges.txt line 40002: ${JSON.stringify(clip[40001])} where CLIP has ${JSON.stringify(clip[40000])}\n`,
    });
    expect(existsSync(h.dir)).toBe(false);
    writeTokenizerFolder(join(source, CLIP_L!.folder));
    expect((await tokenizers(["import", "--config", h.config, source])).code).toBe(0);
    expect((await tokenizers(["check", "--config", h.config])).code).toBe(0);
  });

  test("check says not ready once an installed merges.txt is emptied, and ready again when it is whole", async () => {
    using h = host();
    writeTokenizers(h.dir);
    expect((await tokenizers(["check", "--config", h.config])).code).toBe(0);
    writeFileSync(join(h.dir, CLIP_L!.folder, "merges.txt"), "");
    const emptied = await tokenizers(["check", "--config", h.config]);
    expect(emptied.code).toBe(1);
    expect(emptied.stderr).toStartWith(
      `tokenizers not ready in ${h.dir}:\n  - ${CLIP_L!.folder}/merges.txt does not begin with its #version line, so its first merge is lost\nfix: `,
    );
    writeFileSync(join(h.dir, CLIP_L!.folder, "merges.txt"), CLIP_MERGES);
    expect((await tokenizers(["check", "--config", h.config])).code).toBe(0);
  });
});

describe("tokenizers import checks the tokens a folder names besides its vocabulary", () => {
  test("an added token vocab.json lacks is refused, as CLIPTokenizer would give it id 49408; one at its own id is taken", async () => {
    using h = host();
    const source = writeTokenizers(join(h.root, "from"));
    const added = join(source, CLIP_L!.folder, "added_tokens.json");
    writeFileSync(added, JSON.stringify({ ohwx: 49408 }));
    const refused = await tokenizers(["import", "--config", h.config, source]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toEndWith(`${CLIP_L!.folder}/added_tokens.json names the token "ohwx", which vocab.json lacks\n`);
    writeFileSync(added, JSON.stringify({ "ohwx</w>": 47993 }));
    expect((await tokenizers(["import", "--config", h.config, source])).code).toBe(0);
    writeFileSync(join(h.dir, CLIP_G!.folder, "special_tokens_map.json"), JSON.stringify({ pad_token: "<|pad|>" }));
    const check = await tokenizers(["check", "--config", h.config]);
    expect(check.code).toBe(1);
    expect(check.stderr).toContain(`${CLIP_G!.folder}/special_tokens_map.json names the token "<|pad|>", which vocab.json lacks`);
  });
});

describe("tokenizers import copies regular files from inside the source only", () => {
  test("a link out of the source is refused, though what it leads to is a good vocab.json; a link inside is followed", async () => {
    using h = host();
    const source = writeTokenizers(join(h.root, "from"));
    const vocab = join(source, CLIP_G!.folder, "vocab.json");
    writeFileSync(join(h.root, "outside-vocab.json"), CLIP_VOCAB);
    Bun.spawnSync(["rm", vocab]);
    symlinkSync(join(h.root, "outside-vocab.json"), vocab);
    const out = await tokenizers(["import", "--config", h.config, source]);
    expect(out).toEqual({
      code: 1,
      stdout: "",
      stderr: `tokenizers: nothing imported into ${h.dir}: tokenizer ${CLIP_G!.id} in ${join(source, CLIP_G!.folder)} is not imported: ` +
        `${vocab} leads out of ${source}, to ${join(h.root, "outside-vocab.json")}\n`,
    });
    expect(existsSync(h.dir)).toBe(false);
    mkdirSync(join(source, "shared"));
    writeFileSync(join(source, "shared", "vocab.json"), CLIP_VOCAB);
    Bun.spawnSync(["rm", vocab]);
    symlinkSync(join("..", "shared", "vocab.json"), vocab);
    expect((await tokenizers(["import", "--config", h.config, source])).code).toBe(0);
    expect(lstatSync(join(h.dir, CLIP_G!.folder, "vocab.json")).isFile()).toBe(true);
  });

  test("a FIFO in a tokenizer file's place is refused without hanging the import", async () => {
    using h = host();
    const source = writeTokenizers(join(h.root, "from"));
    const merges = join(source, CLIP_L!.folder, "merges.txt");
    Bun.spawnSync(["rm", merges]);
    expect(Bun.spawnSync(["mkfifo", merges]).exitCode).toBe(0);
    const out = await tokenizers(["import", "--config", h.config, source]);
    expect(out.code).toBe(1);
    expect(out.stderr).toEndWith(`is not imported: ${merges} is not a regular file\n`);
    expect(existsSync(h.dir)).toBe(false);
  });
});

describe("tokenizers import installs both or changes nothing", () => {
  test("a write that fails on the second tokenizer leaves the first as it was and no staging folder, said in one line", async () => {
    using h = host();
    expect((await tokenizers(["import", "--config", h.config, writeTokenizers(join(h.root, "first"))], FILE_SIZE_LIMIT)).code).toBe(0);
    const before = filesUnder(h.dir);
    const failed = await tokenizers(["import", "--config", h.config, secondImport(join(h.root, "second"))], FILE_SIZE_LIMIT);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toBe("");
    expect(failed.stderr).toMatch(
      new RegExp(`^tokenizers: nothing imported into ${h.dir}: writing ${join(h.dir, CLIP_G!.folder)}\\.import-\\d+/vocab\\.json failed: EFBIG[^\\n]*\\n$`),
    );
    expect(filesUnder(h.dir)).toEqual(before);
  });

  test("contrast: without the limit the same import replaces both", async () => {
    using h = host();
    expect((await tokenizers(["import", "--config", h.config, writeTokenizers(join(h.root, "first"))])).code).toBe(0);
    const before = filesUnder(h.dir);
    expect((await tokenizers(["import", "--config", h.config, secondImport(join(h.root, "second"))])).code).toBe(0);
    const after = filesUnder(h.dir);
    expect(Object.keys(after)).toEqual([...Object.keys(before), `${CLIP_L!.folder}/tokenizer.json`].sort());
    expect(after[`${CLIP_G!.folder}/vocab.json`]).not.toBe(before[`${CLIP_G!.folder}/vocab.json`]);
  });
});
