import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { LIKENESS_STEPS, NEXT_STEPS } from "../../src/api/next-steps.ts";
import { ErrorCode, LikenessVerdict } from "../../src/job.ts";
import { REPO } from "../support/host-tree.ts";

// A failed job's card and record say what docs/troubleshooting.md says to do, from one table in code.
const DOC = readFileSync(join(REPO, "docs/troubleshooting.md"), "utf8");

// The "what to do" cell of each row of the error_code table, by code.
function docSteps(doc: string): Record<string, string> {
  const section = doc.split("## A job that failed")[1]!.split("\n## ")[0]!;
  const rows = [...section.matchAll(/^\| `([a-z_]+)` \| .* \| (.*) \|$/gm)].filter((m) => m[1] !== "error_code");
  return Object.fromEntries(rows.map((m) => [m[1]!, m[2]!]));
}

// The "what to do" cell of each row of the likeness verdict table, by verdict.
function verdictSteps(doc: string): Record<string, string> {
  const section = doc.split("## A run that did not learn the person")[1]!.split("\n## ")[0]!;
  const rows = [...section.matchAll(/^\| `([a-z_]+)` \| .* \| (.*) \|$/gm)].filter((m) => m[1] !== "verdict");
  return Object.fromEntries(rows.map((m) => [m[1]!, m[2]!]));
}

describe("what to do with each likeness verdict", () => {
  test("is the troubleshooting page's, word for word, for every verdict and no other", () => {
    expect(Object.keys(verdictSteps(DOC)).sort()).toEqual([...LikenessVerdict.options].sort());
    expect(LIKENESS_STEPS).toEqual(verdictSteps(DOC) as typeof LIKENESS_STEPS);
    // Contrast: a page whose overfit row says otherwise is found.
    const edited = DOC.replace("before the class previews showed the person", "the final one");
    expect(verdictSteps(edited).overfit).not.toBe(LIKENESS_STEPS.overfit);
  });
});

describe("the next step of each error_code", () => {
  test("is the troubleshooting page's what to do, word for word, for every code and no other", () => {
    const fromDoc = docSteps(DOC);
    expect(Object.keys(fromDoc).sort()).toEqual([...ErrorCode.options].sort());
    expect(Object.fromEntries(Object.entries(NEXT_STEPS).map(([code, step]) => [code, step.text]))).toEqual(fromDoc);
  });

  test("contrast: a page whose cuda_oom row says otherwise is found", () => {
    const edited = DOC.replace("a resume on the same card may well run out again", "resume it first");
    expect(edited).not.toBe(DOC);
    expect(docSteps(edited).cuda_oom).not.toBe(NEXT_STEPS.cuda_oom.text);
  });

  test("is a sentence a step, the text being the steps joined: the page's list and the CLI's read the record's words", () => {
    for (const { text, steps } of Object.values(NEXT_STEPS)) {
      expect(steps.join(" ")).toBe(text);
      for (const step of steps.slice(0, -1)) expect(step).toEndWith(".");
    }
    expect(NEXT_STEPS.cuda_oom.steps).toHaveLength(3);
    // Contrast: a code whose advice is one sentence has one step.
    expect(NEXT_STEPS.trainer_crashed.steps).toEqual([NEXT_STEPS.trainer_crashed.text]);
  });

  test("puts a retry on another card or tier first only where a resume on the same card may fail the same way", () => {
    const first = Object.entries(NEXT_STEPS).filter(([, step]) => step.retry_elsewhere).map(([code]) => code);
    expect(first).toEqual(["cuda_oom"]);
    expect(NEXT_STEPS.cuda_oom.text).toStartWith("send the request again on a card with more free memory");
  });
});
