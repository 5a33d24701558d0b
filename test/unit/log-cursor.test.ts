import { afterAll, describe, expect, test } from "bun:test";
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { capLog, decodeCuts, encodeCuts, FIRST_GENERATION, logCutsPath, repairedCuts } from "../../src/job-dir/log-cut.ts";
import { type LogRead, readAfter, tailWithCursor } from "../../src/job-dir/log-cursor.ts";

const root = mkdtempSync(join(tmpdir(), "log-cursor-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const CAP = 1 << 20;
const HEAD = CAP / 4;
let logs = 0;

// A log as the shim starts it: its record first, while it is empty.
function newLog(): string {
  const path = join(root, `train-${logs++}.log`);
  writeFileSync(path, "");
  repairedCuts(path, CAP);
  return path;
}

// Numbered lines of 100 bytes, from `from` on, `bytes` of them in all.
const lines = (from: number, bytes: number) =>
  Array.from({ length: bytes / 100 }, (_, i) => `line ${String(from + i).padStart(8, "0")} ${"x".repeat(85)}\n`).join("");

const text = (read: LogRead) => (read.kind === "bytes" ? Buffer.from(read.bytes).toString() : read.kind);
const generationOf = (log: string) => decodeCuts(readFileSync(logCutsPath(log), "utf8"))!.generation;

describe("reading a log from a cursor", () => {
  test("answers only the bytes written since the cursor, and a cursor to go on from", async () => {
    const log = newLog();
    appendFileSync(log, "loading\nepoch 1/1\n");
    const tail = await tailWithCursor(log, 200, 0);
    expect(tail).toEqual({ lines: ["loading", "epoch 1/1"], lastLineAt: 8, cursor: { generation: FIRST_GENERATION, offset: 8 } });
    appendFileSync(log, "\rsteps: 1%");
    const first = await readAfter(log, tail.cursor!, 0);
    expect(first).toMatchObject({ kind: "bytes", next: { generation: "0", offset: 28 }, cut: false });
    expect(text(first)).toBe("epoch 1/1\n\rsteps: 1%");
    if (first.kind !== "bytes") throw new Error("unreachable");
    expect(text(await readAfter(log, first.next, 0))).toBe("");
    appendFileSync(log, "\rsteps: 2%\n");
    expect(text(await readAfter(log, first.next, 0))).toBe("\rsteps: 2%\n");
  });

  test("never ends an answer inside a UTF-8 character: the rest comes whole with the next", async () => {
    const log = newLog();
    appendFileSync(log, Buffer.concat([Buffer.from("é"), Buffer.from("€").subarray(0, 2)]));
    const read = await readAfter(log, { generation: "0", offset: 0 }, 0);
    expect(read).toMatchObject({ next: { offset: 2 } });
    appendFileSync(log, Buffer.from("€").subarray(2));
    expect(text(await readAfter(log, { generation: "0", offset: 2 }, 0))).toBe("€");
  });

  test("a cursor inside a UTF-8 character is unknown (no answer ends there); one at each character's start is read", async () => {
    const log = newLog();
    const text = "aé€😀\n";
    // A stray continuation byte (invalid UTF-8 a trainer may print) begins no character: an answer may end before it.
    appendFileSync(log, Buffer.concat([Buffer.from(text), Buffer.from([0x78, 0x80, 0x79])]));
    const starts = [0, 1, 3, 6, 10, 11, 12, 13, 14];
    const answers = await Promise.all(Array.from({ length: 15 }, (_, offset) => readAfter(log, { generation: "0", offset }, 0)));
    expect(answers.flatMap((read, offset) => (read.kind === "bytes" ? [offset] : []))).toEqual(starts);
    expect(answers[2]).toEqual({ kind: "unknown", why: "points inside a UTF-8 character (byte 2 continues it)" });
    expect(answers.filter((read) => read.kind === "unknown").map((read) => (read as { why: string }).why)).toEqual(
      [2, 4, 5, 7, 8, 9].map((at) => `points inside a UTF-8 character (byte ${at} continues it)`),
    );
  });

  test("a cursor the log never handed out is unknown: another generation of a log never cut, or past the end", async () => {
    const log = newLog();
    appendFileSync(log, "one\n");
    expect(await readAfter(log, { generation: "0123456789abcdef", offset: 0 }, 0)).toEqual({ kind: "unknown", why: "names a generation this log never had (it was never cut)" });
    expect(await readAfter(log, { generation: "0", offset: 5 }, 0)).toEqual({ kind: "unknown", why: "points past the log's end (4 bytes)" });
    expect(text(await readAfter(log, { generation: "0", offset: 4 }, 0))).toBe("");
  });
});

describe("a cursor from before the shim cut the log", () => {
  // A log past its cap, a cursor at its end, and the cut.
  function cutWithCursorAt(cursorOffset?: number) {
    const log = newLog();
    appendFileSync(log, lines(0, 1_100_000));
    const before = { generation: generationOf(log), offset: cursorOffset ?? readFileSync(log).length };
    const beforeBytes = readFileSync(log);
    expect(capLog(log, CAP)).toBe(1_100_000 - 2 * HEAD);
    return { log, before, beforeBytes };
  }

  test("that had read the whole log answers only what came after the cut, flagged; read as an offset it would skip lines", async () => {
    const { log, before } = cutWithCursorAt();
    const after = lines(11_000, 600_000);
    appendFileSync(log, after);
    const read = await readAfter(log, before, 0);
    expect(read).toMatchObject({ kind: "bytes", cut: true, next: { generation: generationOf(log) } });
    expect(text(read)).toBe(after.slice(0, 1 << 20));
    expect(generationOf(log)).not.toBe(before.generation);
    // Contrast: the bytes now at the old offset are the middle of what came after, not its start.
    const naive = readFileSync(log).subarray(before.offset).toString();
    expect(naive.length).toBeGreaterThan(0);
    expect(after.startsWith(naive.slice(0, 100))).toBe(false);
  });

  test("that stood in the kept tail goes on from the same line, where the tail now lies", async () => {
    const { log, before, beforeBytes } = cutWithCursorAt(1_100_000 - 1000);
    const read = await readAfter(log, before, 0);
    expect(text(read)).toBe(beforeBytes.subarray(before.offset).toString());
    expect(text(read)).toBe(lines(10_990, 1000));
  });

  test("that stood in what the cut dropped goes on from the cut's marker, which says so", async () => {
    const { log, before } = cutWithCursorAt(500_000);
    const read = text(await readAfter(log, before, 0));
    expect(read.startsWith(`\n[lora-worker: ${1_100_000 - 2 * HEAD} bytes of trainer output dropped here`)).toBe(true);
    expect(read.endsWith(lines(10_999, 100))).toBe(true);
  });

  test("that stood in the head every cut keeps goes on from the same byte", async () => {
    const { log, before, beforeBytes } = cutWithCursorAt(1000);
    const read = text(await readAfter(log, before, 0));
    expect(read.startsWith(beforeBytes.subarray(1000, HEAD).toString() + "\n[lora-worker: ")).toBe(true);
  });

  test("from two cuts ago goes on from the last cut's marker, whatever its offset", async () => {
    const { log, before } = cutWithCursorAt();
    appendFileSync(log, lines(11_000, 600_000));
    expect(capLog(log, CAP)).toBeGreaterThan(0);
    const read = text(await readAfter(log, before, 0));
    expect(read.startsWith("\n[lora-worker: ")).toBe(true);
    expect(read.endsWith(lines(16_999, 100))).toBe(true);
  });
});

describe("a record that cannot be trusted", () => {
  test("one read half written is waited out, then gives no cursor; the shim settles it as a generation of its own", async () => {
    const log = newLog();
    appendFileSync(log, "one\n");
    const record = logCutsPath(log);
    writeFileSync(record, readFileSync(record, "utf8").replace('"cutting":false', '"cutting":true '));
    expect(decodeCuts(readFileSync(record, "utf8"))).toBeNull(); // its CRC no longer matches
    const started = performance.now();
    expect(await readAfter(log, { generation: "0", offset: 0 }, 100)).toEqual({ kind: "unsettled" });
    expect(performance.now() - started).toBeGreaterThanOrEqual(100);
    expect(await tailWithCursor(log, 5, 0)).toEqual({ lines: ["one"], lastLineAt: 0, cursor: null });
    const repaired = repairedCuts(log, CAP);
    expect(repaired).toMatchObject({ previous: null, cutting: false, head: HEAD, tailBytes: 0 });
    expect(repaired.generation).not.toBe(FIRST_GENERATION);
    // Whose generation it was is not known: any earlier cursor goes on from the head at most, flagged.
    expect(await readAfter(log, { generation: "0", offset: 4 }, 0)).toMatchObject({ kind: "bytes", cut: true, next: { offset: 4 } });
  });

  test("one left cutting (the shim was killed in the cut) is not trusted; repaired, a cursor from before goes on from the head", async () => {
    const log = newLog();
    appendFileSync(log, lines(0, 400_000));
    const before = decodeCuts(readFileSync(logCutsPath(log), "utf8"))!;
    writeFileSync(logCutsPath(log), encodeCuts({ ...before, cutting: true }));
    expect(await readAfter(log, { generation: "0", offset: 0 }, 0)).toEqual({ kind: "unsettled" });
    expect((await tailWithCursor(log, 5, 0)).cursor).toBeNull();
    expect(repairedCuts(log, CAP)).toMatchObject({ previous: "0", cutting: false, head: HEAD, tailFrom: HEAD, tailAt: HEAD });
    const bytes = readFileSync(log);
    for (const [offset, from] of [[300_000, HEAD], [1000, 1000]]) {
      const read = await readAfter(log, { generation: "0", offset: offset! }, 0);
      expect(read.kind === "bytes" && read.cut).toBe(true);
      expect(text(read)).toBe(bytes.subarray(from).toString());
    }
  });

  test("a log with bytes and no record (an older shim writes it) hands out no cursor and follows none", async () => {
    const log = join(root, "older-shim.log");
    writeFileSync(log, "one\n");
    expect(await tailWithCursor(log, 5, 0)).toEqual({ lines: ["one"], lastLineAt: 0, cursor: null });
    expect(await readAfter(log, { generation: "0", offset: 0 }, 0)).toEqual({ kind: "unrecorded" });
    expect(existsSync(logCutsPath(log))).toBe(false);
    // Contrast: while the log is still empty (its shim has yet to start) nothing can have been cut.
    const empty = join(root, "not-started.log");
    writeFileSync(empty, "");
    expect((await tailWithCursor(empty, 5, 0)).cursor).toEqual({ generation: "0", offset: 0 });
  });
});
