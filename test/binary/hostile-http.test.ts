import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { connect } from "node:net";
import { HOSTILE_CATALOG } from "../fixtures/hostile/catalog.ts";
import { TOKEN_A, writeTokens } from "../support/auth-setup.ts";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { caseBody, caseInit } from "../support/hostile-request.ts";
import { pathsNotSent, snapshotFiles, spawnEvidence } from "../support/leftovers.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

// One compiled worker, with auth on, takes the whole catalog; after each case nothing may have changed.
const tree = makeHostTree();
const AUTH = { authorization: `Bearer ${TOKEN_A}` };
let worker: WorkerProcess;

beforeAll(async () => {
  for (const c of HOSTILE_CATALOG) c.setup?.(tree);
  const tokenFile = writeTokens(join(tree.root, "etc"), [TOKEN_A]);
  worker = await startWorker(tree.writeConfig(`${SIMULATE_TABLES(0.01)}[auth]\ntoken_file = ${JSON.stringify(tokenFile)}\n`), { command: [ensureBinary()] });
});

afterAll(async () => {
  await worker[Symbol.asyncDispose]();
  tree[Symbol.dispose]();
});

const NOTHING = { jobRows: 0, jobDirs: [], processes: [] };

describe("the hostile catalog over HTTP against the compiled binary", () => {
  for (const c of HOSTILE_CATALOG) {
    test(`${c.name} answers ${c.status}${c.status === 422 ? ` naming ${c.field ?? "the body"}` : ""} and leaves no row, file or process`, async () => {
      const before = snapshotFiles(tree);
      const res = await worker.request(c.path ?? "/train", caseInit(c, tree, AUTH));
      const body = (await res.json()) as { detail: unknown };
      expect(res.status).toBe(c.status);
      if (c.status === 422) {
        const detail = body.detail as Array<{ loc: unknown[]; msg: string; type: string }>;
        expect(detail.map((d) => d.loc)).toContainEqual(c.field === null ? ["body"] : ["body", c.field!]);
        const sent = caseBody(c, tree)?.toString("utf8") ?? "";
        for (const item of detail) expect(pathsNotSent(item.msg, sent)).toEqual([]);
      } else {
        expect(typeof body.detail).toBe("string");
      }
      expect(snapshotFiles(tree)).toEqual(before);
      expect(spawnEvidence(tree, worker.proc.pid)).toEqual(NOTHING);
    });
  }

  test("the worker is still up, logged no unhandled error, and no prototype was polluted by __proto__ keys", async () => {
    expect(worker.proc.exitCode).toBeNull();
    expect((await worker.json("/healthz")).status).toBe(200);
    expect(worker.output()).not.toContain("unhandled error");
    // A polluted Object.prototype would fill in a field the body leaves out.
    const { seed: _, ...withoutSeed } = tree.validRequest();
    const res = await worker.request("/train", { method: "POST", headers: { ...AUTH, "content-type": "application/json" }, body: JSON.stringify(withoutSeed) });
    expect(await res.json()).toEqual({ detail: [{ loc: ["body", "seed"], msg: "field required", type: "missing" }] });
  });

  test("a body far past the limit is refused with a detail and a closed connection, not drained", async () => {
    const res = await worker.request("/train", { method: "POST", headers: { ...AUTH, "content-type": "application/json" }, body: Buffer.alloc(4 * 1024 * 1024, 0x20) });
    expect([res.status, res.headers.get("connection"), await res.json()]).toEqual([413, "close", { detail: "request body is larger than 65536 bytes" }]);
  });

  test("a client that never finishes its headers is disconnected", async () => {
    const { port } = new URL(worker.url);
    const started = performance.now();
    const closed = await new Promise<number>((resolve) => {
      const socket = connect(Number(port), "127.0.0.1", () => socket.write("POST /train HTTP/1.1\r\nHost: x\r\nX-Slow: "));
      socket.on("close", () => resolve(performance.now() - started));
      socket.on("error", () => {});
    });
    expect(closed).toBeLessThan(20_000);
  }, 25_000);

  test("the valid request the catalog mutates is accepted, so each refusal above is the case's doing", async () => {
    const res = await worker.request("/train", { method: "POST", headers: { ...AUTH, "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) });
    const body = (await res.json()) as { worker_job_id: string };
    expect(res.status).toBe(200);
    expect(spawnEvidence(tree, worker.proc.pid).jobRows).toBe(1);
    await worker.request(`/train/${body.worker_job_id}/cancel`, { method: "POST", headers: AUTH });
  });
});
