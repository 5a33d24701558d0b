import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { TOKENIZERS } from "../../src/tokenizers/layout.ts";
import { MAIN, makeHostTree } from "../support/host-tree.ts";
import { tmpfsUnavailable } from "../support/small-tmpfs.ts";
import { filesUnder, runTokenizers, secondImport, writeTokenizers } from "../support/tokenizers.ts";

const [CLIP_L, CLIP_G] = TOKENIZERS;
const UNAVAILABLE = tmpfsUnavailable();
const tokenizers = (...args: string[]) => runTokenizers([process.execPath, MAIN], args);

// A folder bind-mounted on itself cannot be renamed (EBUSY): the second swap of an import fails after the first.
function pinned(folder: string): Disposable {
  const mounted = Bun.spawnSync(["mount", "--bind", folder, folder], { stderr: "pipe" });
  if (mounted.exitCode !== 0) throw new Error(`mount --bind ${folder} exited ${mounted.exitCode}: ${mounted.stderr}`);
  return { [Symbol.dispose]: () => void Bun.spawnSync(["umount", folder]) };
}

describe.skipIf(UNAVAILABLE !== null)("tokenizers import when the second swap fails", () => {
  test("puts the first tokenizer back as it was, leaves nothing beside them and says what failed in one line", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig('[trainer]\nmode = "simulate"\n');
    const dir = join(tree.state, "tokenizers");
    expect((await tokenizers("import", "--config", config, writeTokenizers(join(tree.root, "first")))).code).toBe(0);
    const before = filesUnder(dir);
    const second = secondImport(join(tree.root, "second"));
    {
      using _pin = pinned(join(dir, CLIP_G!.folder));
      const failed = await tokenizers("import", "--config", config, second);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toMatch(
        new RegExp(`^tokenizers: nothing imported into ${dir}: putting ${join(dir, CLIP_G!.folder)} in place failed: EBUSY[^\\n]*\\n$`),
      );
      expect(filesUnder(dir)).toEqual(before);
    }
    // Contrast: unpinned, the same import swaps both in.
    expect((await tokenizers("import", "--config", config, second)).code).toBe(0);
    expect(Object.keys(filesUnder(dir))).toContain(`${CLIP_L!.folder}/tokenizer.json`);
  });
});
