import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Conflict, Unavailable } from "../../src/api/openapi.ts";
import { ErrorCode, JobStatus, Phase } from "../../src/job.ts";

// The pages a person reads when something went wrong name every code the worker can answer with.
const DOCS = join(import.meta.dir, "../..", "docs");
const page = (name: string) => readFileSync(join(DOCS, name), "utf8");
// The first cell of each table row, as written: `code` or `409 reason`.
const firstCells = (text: string) => text.split("\n").filter((l) => l.startsWith("| `") || /^\| \d{3}/.test(l)).map((l) => l.split(" | ")[0]!.slice(2));

describe("the troubleshooting page", () => {
  const text = page("troubleshooting.md");
  const cells = firstCells(text);

  test("has a row for every error_code, and for every reason a refusal carries", () => {
    for (const code of ErrorCode.options) expect(cells).toContain(`\`${code}\``);
    const reasons = [...Conflict.shape.reason.options.map((r) => `409 ${r}`), ...Unavailable.shape.reason.options.map((r) => `503 ${r}`)];
    for (const reason of reasons) expect(cells).toContain(`\`${reason}\``);
  });

  test("contrast: a code the worker does not have is not found among the rows", () => {
    expect(cells).not.toContain("`gpu_melted`");
    expect(cells.length).toBeGreaterThan(ErrorCode.options.length);
  });
});

describe("the lifecycle page", () => {
  test("names every status and every phase", () => {
    const text = page("lifecycle.md");
    for (const name of [...JobStatus.options, ...Phase.options]) expect(text).toContain(name);
  });
});
