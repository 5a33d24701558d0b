import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { closeSync, fstatSync, mkdtempSync, openSync, readSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repairedCuts } from "../../src/job-dir/log-cut.ts";
import type { LogCursor } from "../../src/job-dir/log-cut.ts";
import { readAfter } from "../../src/job-dir/log-cursor.ts";
import { REPO } from "../support/host-tree.ts";

// A trainer appending numbered lines and a shim cutting the log to its cap, each a process of its own, while this
// process follows the log: by cursor, and (the contrast) by a plain byte offset that, like a follower that knows no
// generations, takes a log shorter than its offset for a cut and goes on from its end.
setDefaultTimeout(30_000);

const CAP = 1 << 20;
// The writer goes on until the follower has seen this many generations (cuts), not for a fixed time: a loaded host
// writes less in a second, and fewer cuts would prove less.
const GENERATIONS = 8;
const DEADLINE_MS = 20_000;
const root = mkdtempSync(join(tmpdir(), "log-cursor-race-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const WRITER = `
import { existsSync, openSync, writeSync } from "node:fs";
const fd = openSync(process.argv[1], "a");
for (let n = 0; !existsSync(process.argv[2]); await Bun.sleep(1)) {
  for (let k = 0; k < 100; k++, n++) writeSync(fd, \`line \${String(n).padStart(8, "0")} \${"x".repeat(85)}\\n\`);
}`;
const CUTTER = `
import { existsSync } from "node:fs";
import { capLog } from "${REPO}/src/job-dir/log-cut.ts";
while (!existsSync(process.argv[2])) { capLog(process.argv[1], ${CAP}); await Bun.sleep(2); }`;

interface Answer {
  text: string;
  cut: boolean;
}

// Where what was followed is not what was written, and nothing said so: a line seen twice or out of order, or,
// outside an answer flagged as cut, a line missing or torn that no cut marker accounts for.
function unsaid(answers: Answer[]): string[] {
  const flagged: Array<[number, number]> = [];
  let full = "";
  for (const a of answers) {
    if (a.cut) flagged.push([full.length, full.length + a.text.length]);
    full += a.text;
  }
  // A flagged answer with no bytes flags where the next begins.
  const inFlagged = (at: number) => flagged.some(([from, to]) => at >= from && at < Math.max(to, from + 1));
  const problems: string[] = [];
  let prev: { n: number; at: number } | null = null;
  let between = { marker: false, odd: false, flagged: false };
  let at = 0;
  for (const line of full.split("\n").slice(0, -1)) {
    const start = at;
    at += line.length + 1;
    const regular = /^line (\d{8}) x{85}$/.exec(line);
    if (!regular) {
      if (line.startsWith("[lora-worker: ")) between.marker = true;
      else between.odd = true;
      between.flagged ||= inFlagged(start);
      continue;
    }
    const n = Number(regular[1]);
    if (prev !== null) {
      const explained = between.marker || between.flagged || inFlagged(prev.at) || inFlagged(start);
      if (n <= prev.n) problems.push(`line ${n} after line ${prev.n}`);
      else if ((n !== prev.n + 1 || between.odd) && !explained) problems.push(`line ${prev.n} to ${n}, unsaid`);
    }
    prev = { n, at: start };
    between = { marker: false, odd: false, flagged: false };
  }
  return problems;
}

// A child process killed with the test, however it ends.
function spawned(argv: string[]) {
  const proc = Bun.spawn(argv, { stderr: "inherit" });
  return {
    proc,
    async [Symbol.asyncDispose]() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
  };
}

function readRaw(path: string, offset: number): { text: string; offset: number } {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const from = size < offset ? size : offset;
    const buf = Buffer.alloc(Math.min(size - from, 1 << 20));
    const got = readSync(fd, buf, 0, buf.length, from);
    return { text: buf.subarray(0, got).toString("latin1"), offset: from + got };
  } finally {
    closeSync(fd);
  }
}

describe("following a log the shim cuts while the trainer writes", () => {
  test("by cursor, every answer is what was written since the last, or is flagged as cut; by offset, lines go missing unsaid", async () => {
    const log = join(root, "train.log");
    const stop = join(root, "stop");
    const stopWriting = join(root, "stop-writing");
    writeFileSync(log, "");
    repairedCuts(log, CAP);
    await using cutter = spawned([process.execPath, "-e", CUTTER, log, stop]);
    await using writer = spawned([process.execPath, "-e", WRITER, log, stopWriting]);
    const byCursor: Answer[] = [];
    const byOffset: Answer[] = [];
    const generations = new Set<string>();
    let cursor: LogCursor = { generation: "0", offset: 0 };
    let offset = 0;
    const deadline = Date.now() + DEADLINE_MS;
    for (let last = false; !last; ) {
      last = writer.proc.exitCode !== null;
      if (Date.now() > deadline) throw new Error(`saw ${generations.size} of ${GENERATIONS} generations in ${DEADLINE_MS} ms`);
      const read = await readAfter(log, cursor, 2000);
      if (read.kind !== "bytes") throw new Error(`read ${read.kind}`);
      byCursor.push({ text: Buffer.from(read.bytes).toString("latin1"), cut: read.cut });
      cursor = read.next;
      generations.add(cursor.generation);
      const raw = readRaw(log, offset);
      byOffset.push({ text: raw.text, cut: false });
      offset = raw.offset;
      if (generations.size >= GENERATIONS) writeFileSync(stopWriting, "");
      await Bun.sleep(1);
    }
    writeFileSync(stop, "");
    expect(await cutter.proc.exited).toBe(0);
    expect(await writer.proc.exited).toBe(0);
    expect(generations.size).toBeGreaterThanOrEqual(GENERATIONS);
    expect(unsaid(byCursor)).toEqual([]);
    expect(unsaid(byOffset).length).toBeGreaterThan(0);
  });
});
