import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { dispatchOk, realModeConfig } from "../support/real-mode.ts";
import { fedTrainer } from "../support/fed-trainer.ts";
import { untilEnded } from "../support/jobs.ts";
import { waitFor } from "../support/wait.ts";
import { decodeCuts, encodeCuts, logCutsPath } from "../../src/job-dir/log-cut.ts";

const CAP = 1 << 20;

// The fed trainer (support/fed-trainer.ts) under a real shim that cuts its log at 1 MiB.
function fedJob(tree: HostTree) {
  const fed = fedTrainer(tree);
  const app = inProcessApp(tree, realModeConfig(tree, fed.trainer, { trainer: { log_max_bytes: CAP } }), [fed.trainer]);
  return {
    app,
    feed: fed.feed,
    end: fed.end,
    // Dispatched; with `first`, once the trainer has printed it.
    async start(first?: string) {
      const row = await dispatchOk(app, tree.validRequest());
      if (first !== undefined) {
        fed.feed(first);
        await waitFor(() => sizeOf(row.log_path) === Buffer.byteLength(first), "the trainer's first lines");
      }
      return { id: row.id, log: row.log_path };
    },
  };
}

async function getLog(app: ReturnType<typeof inProcessApp>["app"], id: string, query: string) {
  const res = await app.request(`/train/${id}/log${query}`);
  return { status: res.status, cursor: res.headers.get("x-log-cursor"), cut: res.headers.get("x-log-cut"), text: await res.text() };
}

const sizeOf = (path: string) => statSync(path).size;
const generationOf = (cursor: string | null) => cursor?.split(".")[0];
// Numbered lines of 100 bytes, `bytes` of them in all.
const lines = (from: number, bytes: number) =>
  Array.from({ length: bytes / 100 }, (_, i) => `line ${String(from + i).padStart(8, "0")} ${"x".repeat(85)}\n`).join("");

describe("GET /train/{id}/log with a cursor", () => {
  test("a tail hands out a cursor at its last line; a read from a cursor answers only the bytes written since", async () => {
    using tree = makeHostTree();
    const job = fedJob(tree);
    await using _ = job.app;
    const { id, log } = await job.start("loading\nepoch 1/1\n");
    const tail = await getLog(job.app.app, id, "");
    expect(tail).toEqual({ status: 200, cursor: "0.8", cut: null, text: "loading\nepoch 1/1\n" });
    expect(await getLog(job.app.app, id, "?after=0.8")).toEqual({ status: 200, cursor: "0.18", cut: null, text: "epoch 1/1\n" });
    expect(await getLog(job.app.app, id, "?after=0.18")).toEqual({ status: 200, cursor: "0.18", cut: null, text: "" });
    job.feed("\rsteps:  1%| 1/400");
    await waitFor(() => sizeOf(log) > 18, "the bar");
    expect(await getLog(job.app.app, id, "?after=0.18")).toMatchObject({ cursor: "0.36", text: "\rsteps:  1%| 1/400" });
    job.feed("\rsteps:  1%| 2/400\n");
    await waitFor(() => sizeOf(log) > 36, "the bar's redraw");
    expect(await getLog(job.app.app, id, "?after=0.36")).toMatchObject({ cursor: "0.55", text: "\rsteps:  1%| 2/400\n" });
    // Contrast: without a cursor the same log answers its tail again.
    expect((await getLog(job.app.app, id, "?lines=2")).text).toBe("epoch 1/1\nsteps:  1%| 2/400\n");
  });

  test("after the shim cuts the log, a cursor from before answers what came since, flagged, not the bytes now at its offset", async () => {
    using tree = makeHostTree();
    const job = fedJob(tree);
    await using _ = job.app;
    const { id, log } = await job.start();
    job.feed(lines(0, 1_000_000));
    await waitFor(() => sizeOf(log) === 1_000_000, "a log just under its cap");
    const before = (await getLog(job.app.app, id, "?lines=1")).cursor!;
    const read = await getLog(job.app.app, id, `?after=${before}`);
    expect(read).toMatchObject({ cursor: "0.1000000", cut: null, text: lines(9999, 100) });
    const since = lines(10_000, 100_000);
    job.feed(since);
    const cutTo = await waitFor(async () => generationOf((await getLog(job.app.app, id, "?lines=1")).cursor) !== "0" && sizeOf(log), "the shim to cut the log");
    expect(cutTo).toBeLessThan(CAP);
    const after = await getLog(job.app.app, id, `?after=${read.cursor}`);
    expect(after).toMatchObject({ status: 200, cut: "true", text: since });
    expect(generationOf(after.cursor)).toMatch(/^[0-9a-f]{16}$/);
    expect(await getLog(job.app.app, id, `?after=${after.cursor}`)).toMatchObject({ cursor: after.cursor, cut: null, text: "" });
    // Contrast: the old offset read in the log as it is now points past its end, or into other bytes.
    expect(readFileSync(log).subarray(1_000_000).toString()).not.toBe(since);
    expect((await getLog(job.app.app, id, `?after=${generationOf(after.cursor)}.1000000`)).status).toBe(422);
  });

  test("a bad cursor, or one with lines, is refused 422 naming it, and changes nothing", async () => {
    using tree = makeHostTree();
    const job = fedJob(tree);
    await using _ = job.app;
    const { id, log } = await job.start("one\n");
    const record = readFileSync(`${log}.cuts`, "utf8");
    const refusal = (name: string, msg: string) => ({ detail: [{ loc: ["query", name], msg, type: "value_error" }] });
    const malformed = refusal("after", "is not a log cursor (the x-log-cursor of an earlier answer)");
    const cases: Array<[string, unknown]> = [
      ["?after=", malformed],
      ["?after=-1", malformed],
      ["?after=0.-4", malformed],
      ["?after=0.04", malformed],
      ["?after=0.4e0", malformed],
      ["?after=4", malformed],
      ["?after=0.9999999999999999", malformed],
      ["?after=0123456789ABCDEF.0", malformed],
      ["?after=0.4&lines=3", refusal("lines", "cannot be combined with after, which answers all the log gained since the cursor")],
      ["?after=0.5", refusal("after", "is not a cursor of this log: it points past the log's end (4 bytes)")],
      ["?after=0123456789abcdef.0", refusal("after", "is not a cursor of this log: it names a generation this log never had (it was never cut)")],
    ];
    const answers = await Promise.all(cases.map(async ([query]) => {
      const res = await job.app.app.request(`/train/${id}/log${query}`);
      return [query, await res.json()];
    }));
    expect(answers).toEqual(cases);
    expect({ log: readFileSync(log, "utf8"), record: readFileSync(`${log}.cuts`, "utf8") }).toEqual({ log: "one\n", record });
    // Contrast: the same parameters, well formed, are answered.
    expect(await getLog(job.app.app, id, "?after=0.4")).toMatchObject({ status: 200, cursor: "0.4", text: "" });
    expect(await getLog(job.app.app, id, "?lines=3")).toMatchObject({ status: 200, cursor: "0.0", text: "one\n" });
  });

  test("a cursor inside a UTF-8 character is refused 422, as one this log never handed out; one at its start is answered", async () => {
    using tree = makeHostTree();
    const job = fedJob(tree);
    await using _ = job.app;
    const { id } = await job.start("héllo\n");
    const res = await job.app.app.request(`/train/${id}/log?after=0.2`);
    expect({ status: res.status, body: await res.json() }).toEqual({
      status: 422,
      body: { detail: [{ loc: ["query", "after"], msg: "is not a cursor of this log: it points inside a UTF-8 character (byte 2 continues it)", type: "value_error" }] },
    });
    expect(await getLog(job.app.app, id, "?after=0.3")).toEqual({ status: 200, cursor: "0.7", cut: null, text: "llo\n" });
  });

  test("a cut record left half written (a shim killed in a cut) answers 503 to a cursor while the run lasts, and is settled when it ends", async () => {
    using tree = makeHostTree();
    const job = fedJob(tree);
    await using _ = job.app;
    const { id, log } = await job.start("one\n");
    const cuts = decodeCuts(readFileSync(logCutsPath(log), "utf8"))!;
    writeFileSync(logCutsPath(log), encodeCuts({ ...cuts, cutting: true }));
    expect((await getLog(job.app.app, id, "?after=0.0")).status).toBe(503);
    job.end();
    await untilEnded(job.app, id, 10_000);
    expect(decodeCuts(readFileSync(logCutsPath(log), "utf8"))).toMatchObject({ cutting: false });
    expect(await getLog(job.app.app, id, "?after=0.0")).toMatchObject({ status: 200, cut: "true", text: "one\n" });
    expect((await getLog(job.app.app, id, "")).cursor).not.toBeNull();
  });

  test("a log without a record of its cuts (an older shim writes it) hands out no cursor and refuses one", async () => {
    using tree = makeHostTree();
    const job = fedJob(tree);
    await using _ = job.app;
    const { id, log } = await job.start("one\n");
    rmSync(`${log}.cuts`);
    expect(await getLog(job.app.app, id, "")).toEqual({ status: 200, cursor: null, cut: null, text: "one\n" });
    const res = await job.app.app.request(`/train/${id}/log?after=0.0`);
    expect(res.status).toBe(422);
    expect(((await res.json()) as any).detail[0].msg).toBe(
      "cannot be followed: this job's log has no record of its cuts (its run was started by an older worker); read its last lines instead",
    );
  });
});
