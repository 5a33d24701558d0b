import { describe, expect, test } from "bun:test";
import { ConfigSchema, type Config } from "../../src/config/schema.ts";
import { checkTrain } from "../../src/request/check.ts";
import { HOSTILE_CATALOG } from "../fixtures/hostile/catalog.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { caseBody } from "../support/hostile-request.ts";
import { pathsNotSent, snapshotFiles } from "../support/leftovers.ts";

function configFor(tree: HostTree): Config {
  return ConfigSchema.parse({ state_dir: tree.state, handoff_root: tree.handoff, model_roots: [tree.models], trainer: { mode: "simulate" } });
}

describe("the hostile catalog against the validator", () => {
  const cases = HOSTILE_CATALOG.filter((c) => c.layer === "both");

  test("the catalog holds every kind of case the issue names", () => {
    expect(HOSTILE_CATALOG.length).toBeGreaterThan(150);
    expect(new Set(HOSTILE_CATALOG.map((c) => c.name)).size).toBe(HOSTILE_CATALOG.length);
  });

  for (const c of cases) {
    test(`${c.name} is refused naming ${c.field ?? "the body"}, and nothing is created`, async () => {
      using tree = makeHostTree();
      c.setup?.(tree);
      const text = caseBody(c, tree)!.toString("utf8");
      const before = snapshotFiles(tree);
      const result = await checkTrain(JSON.parse(text), configFor(tree));
      if (result.ok || result.error.kind !== "invalid") throw new Error(`expected a 422, got ${JSON.stringify(result)}`);
      const locs = result.error.detail.map((d) => d.loc);
      expect(locs).toContainEqual(c.field === null ? ["body"] : ["body", c.field!]);
      for (const item of result.error.detail) expect(pathsNotSent(item.msg, text)).toEqual([]);
      expect(snapshotFiles(tree)).toEqual(before);
    });
  }

  test("no prototype was polluted by __proto__ or constructor keys", async () => {
    using tree = makeHostTree();
    for (const c of cases.filter((c) => c.field === "__proto__" || c.field === "constructor")) {
      await checkTrain(JSON.parse(caseBody(c, tree)!.toString("utf8")), configFor(tree));
    }
    expect(Object.getOwnPropertyNames(Object.prototype).filter((k) => ["polluted", "tier", "prototype"].includes(k))).toEqual([]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const { seed: _, ...withoutSeed } = tree.validRequest();
    const result = await checkTrain(withoutSeed, configFor(tree));
    expect(result).toEqual({
      ok: false,
      error: { kind: "invalid", detail: [{ loc: ["body", "seed"], msg: "field required", type: "missing" }] },
    });
  });

  test("the valid request the cases mutate passes: the catalog's refusals are not blanket ones", async () => {
    using tree = makeHostTree();
    expect((await checkTrain(tree.validRequest(), configFor(tree))).ok).toBe(true);
  });
});
