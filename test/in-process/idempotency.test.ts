import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { makeHostTree } from "../support/host-tree.ts";
import { TRAINERS, realModeConfig, supervisorFor } from "../support/real-mode.ts";

setDefaultTimeout(30_000);

function harness() {
  const tree = makeHostTree();
  const trainer = join(TRAINERS, "silent-after-start.sh");
  const s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
  return {
    tree,
    ...s,
    async [Symbol.asyncDispose]() {
      await s[Symbol.asyncDispose]();
      tree[Symbol.dispose]();
    },
  };
}

describe("idempotent dispatch", () => {
  test("the same body while its job runs returns the same job instead of 409 busy", async () => {
    await using h = harness();
    const first = await h.dispatcher.dispatch(h.tree.validRequest());
    const retry = await h.dispatcher.dispatch({ ...h.tree.validRequest() });
    expect(first.ok && retry.ok && retry.value.id === first.value.id).toBe(true);
    expect(h.store.activeJobs().length).toBe(1);
  });

  test("contrast: a different body while a job runs is refused as busy", async () => {
    await using h = harness();
    const first = await h.dispatcher.dispatch(h.tree.validRequest());
    const other = await h.dispatcher.dispatch(h.tree.validRequest({ seed: 7, output_name: "other" }));
    expect(other).toEqual({ ok: false, error: { kind: "busy", activeId: first.ok ? first.value.id : "", unsupervised: false } });
  });

  test("the same Idempotency-Key returns the same job even after that job ended", async () => {
    await using h = harness();
    const first = await h.dispatcher.dispatch(h.tree.validRequest(), "key-1");
    if (!first.ok) throw new Error(JSON.stringify(first));
    await h.supervisor.cancel(first.value.id);
    const retry = await h.dispatcher.dispatch(h.tree.validRequest(), "key-1");
    expect(retry).toMatchObject({ ok: true, value: { id: first.value.id, status: "cancelled" } });
  });

  test("concurrent retries with one key start one job", async () => {
    await using h = harness();
    const results = await Promise.all(Array.from({ length: 20 }, () => h.dispatcher.dispatch(h.tree.validRequest(), "key-2")));
    const ids = new Set(results.map((r) => (r.ok ? r.value.id : r.error.kind)));
    expect(ids.size).toBe(1);
    expect([...ids][0]).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("an Idempotency-Key reused with a different body is refused", async () => {
    await using h = harness();
    await h.dispatcher.dispatch(h.tree.validRequest(), "key-3");
    const reuse = await h.dispatcher.dispatch(h.tree.validRequest({ seed: 9 }), "key-3");
    expect(reuse).toMatchObject({ ok: false, error: { kind: "invalid", detail: [{ loc: ["header", "Idempotency-Key"], type: "idempotency_mismatch" }] } });
  });

  test("the same fields in another order are the same request; a body that adds samples: 0 is another (docs/api.md)", async () => {
    await using h = harness();
    const first = await h.dispatcher.dispatch(h.tree.validRequest(), "key-4");
    if (!first.ok) throw new Error(JSON.stringify(first));
    const reversed = Object.fromEntries(Object.entries(h.tree.validRequest()).reverse());
    expect(await h.dispatcher.dispatch(reversed, "key-4")).toMatchObject({ ok: true, value: { id: first.value.id } });
    const zero = await h.dispatcher.dispatch(h.tree.validRequest({ samples: 0 }), "key-4");
    expect(zero).toMatchObject({ ok: false, error: { kind: "invalid", detail: [{ type: "idempotency_mismatch" }] } });
  });
});
