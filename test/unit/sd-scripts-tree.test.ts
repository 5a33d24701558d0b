import { describe, expect, test } from "bun:test";
import { appendFileSync, cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describeTree, judgeTree } from "../../src/trainer/sd-scripts-tree.ts";

// An sd-scripts tree of 48d368f, as `bun run real-trainer` names it; no registry holds one, so CI skips this.
const SD_SCRIPTS = process.env.SD_SCRIPTS_DIR ?? "";

describe.skipIf(SD_SCRIPTS === "")("which sd-scripts a tree is, told by its files' content", () => {
  function copy(): { dir: string } & Disposable {
    const dir = mkdtempSync(join(tmpdir(), "lora-worker-sd-scripts-tree-"));
    cpSync(SD_SCRIPTS, join(dir, "t"), { recursive: true });
    return { dir: join(dir, "t"), [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
  }

  test("a tree laid out from 48d368f without .git is that commit, naming the files it lacks", () => {
    const verdict = judgeTree(SD_SCRIPTS);
    expect(verdict.proven).toBe(true);
    expect(describeTree(verdict)).toStartWith("sd-scripts 48d368f: ");
  });

  test("one byte more in one Python file is another tree, named by that file (the contrast)", () => {
    using tree = copy();
    appendFileSync(join(tree.dir, "library/sai_model_spec.py"), "\n");
    const verdict = judgeTree(tree.dir);
    expect(verdict.proven).toBe(false);
    expect(describeTree(verdict)).toBe("not sd-scripts 48d368f: of its files, 1 changed (library/sai_model_spec.py)" +
      (verdict.missing.length === 0 ? "" : `; ${verdict.missing.length} missing (${verdict.missing.join(", ")})`));
    expect(verdict.digest).not.toBe(judgeTree(SD_SCRIPTS).digest);
  });

  test("a missing Python source is another tree; a missing README is that commit, named absent", () => {
    using withoutSource = copy();
    rmSync(join(withoutSource.dir, "library/train_util.py"));
    expect(judgeTree(withoutSource.dir).proven).toBe(false);
    using withoutReadme = copy();
    rmSync(join(withoutReadme.dir, "README.md"));
    const verdict = judgeTree(withoutReadme.dir);
    expect(verdict.proven).toBe(true);
    expect(verdict.missing).toContain("README.md");
  });
});
