import { describe, expect, test } from "bun:test";
import { refusalError } from "../../src/api/errors.ts";
import { Conflict, Unavailable } from "../../src/api/openapi.ts";
import { REFUSALS, reasonsOf } from "../../src/dispatch/refusal.ts";

// The table is the one place a refusal is spelled: its answers and the OpenAPI enums are read off it.
describe("the table of refusals", () => {
  test("the OpenAPI enums of reasons are its rows of 409 and of 503, in its order", () => {
    const kinds = Object.keys(REFUSALS);
    const row = (k: string) => REFUSALS[k as keyof typeof REFUSALS] as { status: number; reason?: string };
    const of = (status: number) => kinds.filter((k) => row(k).status === status).map((k) => row(k).reason ?? k);
    expect(Conflict.shape.reason.options).toEqual(of(409) as typeof Conflict.shape.reason.options);
    expect(Unavailable.shape.reason.options).toEqual(of(503) as typeof Unavailable.shape.reason.options);
    // Contrast: the rows answered 404 and 422 carry no reason, so no enum lists them.
    expect([...reasonsOf(409), ...reasonsOf(503)]).not.toContain("invalid");
    expect([...reasonsOf(409), ...reasonsOf(503)]).not.toContain("no_such_job");
  });

  test("a refusal is answered with its row's status, reason and Retry-After", () => {
    const busy = refusalError({ kind: "busy", activeId: "a", unsupervised: false });
    expect([busy.status, busy.body.reason, busy.headers]).toEqual([409, "busy", { "Retry-After": "30" }]);
    const refused = { reason: "cotenant_active", detail: "d", device_index: 0, free_mib: 1, needed_mib: 2, cotenants: [] };
    const vram = refusalError({ kind: "refused", refusal: refused as never });
    expect([vram.status, vram.body, vram.headers]).toEqual([409, refused, { "Retry-After": "60" }]);
    const probe = refusalError({ kind: "refused", refusal: { reason: "gpu_probe_failed", detail: "no driver" } });
    expect([probe.status, probe.body, probe.headers]).toEqual([503, { detail: "no driver", reason: "gpu_probe_failed" }, {}]);
    // Contrast: a row without Retry-After sends none.
    expect(refusalError({ kind: "output_exists", detail: "d" }).headers).toEqual({});
  });

  test("a backend's refusal is answered under the reason arbo has always read, slurm_refused, with its words", () => {
    const refused = refusalError({ kind: "backend_refused", detail: "Slurm would not take the run: no partition" });
    expect([refused.status, refused.body]).toEqual([503, { detail: "Slurm would not take the run: no partition", reason: "slurm_refused" }]);
    expect(Unavailable.shape.reason.options).toContain("slurm_refused");
    // Contrast: the kind's own name is not on the wire.
    expect(Unavailable.shape.reason.options as string[]).not.toContain("backend_refused");
  });
});
