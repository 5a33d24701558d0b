import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_TAIL_BYTES, tailLines, tailOf } from "../../src/job-dir/log-tail.ts";
import { screenLine } from "../../src/progress/progress.ts";

const dir = mkdtempSync(join(tmpdir(), "log-tail-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function logFile(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const redraw = (n: number, total: number) => `steps:  42%|████▏     | ${n}/${total} [00:10<00:14, 4.02it/s, avr_loss=0.0${n % 997}]`;

// A bar redrawn `count` times on one line, each redraw "\r" + the whole line, closed with "\n" as tqdm does.
function bar(count: number): string {
  return `${Array.from({ length: count }, (_, i) => `\r${redraw(i + 1, count)}`).join("")}\n`;
}

const LONG_BAR = bar(100_000);
const HEAD = "2025-01-01 12:00:00 INFO     prepare optimizer\nloading model\n";

describe("tailLines", () => {
  test("a bar redrawn 100k times, longer than the window, shows its last redraw", () => {
    const line = LONG_BAR;
    expect(line.length).toBeGreaterThan(MAX_TAIL_BYTES);
    const path = logFile("long-bar.log", `${HEAD}${line}`);
    expect(tailLines(path, 5)).toEqual([redraw(100_000, 100_000)]);
    expect(tailLines(path, 1)).toEqual([redraw(100_000, 100_000)]);
  });

  test("the lines after an over-long bar follow its last redraw, and a bar still being drawn shows its latest redraw", () => {
    expect(tailLines(logFile("bar-then-line.log", `${HEAD}${LONG_BAR}model saved.\n`), 3)).toEqual([redraw(100_000, 100_000), "model saved."]);
    expect(tailLines(logFile("open-bar.log", `${HEAD}model saved.\n${bar(120_000).slice(0, -1)}`), 3)).toEqual([redraw(120_000, 120_000)]);
  });

  test("contrast: an over-long line with no \"\\r\" is partial text and is not shown as if it were whole", () => {
    const plain = `${"x".repeat(MAX_TAIL_BYTES + 1000)}\n`;
    expect(tailLines(logFile("long-plain.log", `${HEAD}${plain}`), 5)).toEqual([]);
    expect(tailLines(logFile("long-plain-then.log", `${HEAD}${plain}model saved.\n`), 5)).toEqual(["model saved."]);
    expect(tailLines(logFile("long-plain-open.log", `${HEAD}${plain.slice(0, -1)}`), 5)).toEqual([]);
    expect(tailLines(logFile("long-plain-crlf.log", `${HEAD}${plain.slice(0, -1)}\r\nmodel saved.\r\n`), 5)).toEqual(["model saved."]);
  });

  test("an ordinary log shows its last lines, each tqdm line as its last redraw", () => {
    const path = logFile("ordinary.log", `${HEAD}${bar(3)}model saved.\n`);
    expect(tailLines(path, 2)).toEqual([redraw(3, 3), "model saved."]);
    expect(tailLines(path, 10)).toEqual(["2025-01-01 12:00:00 INFO     prepare optimizer", "loading model", redraw(3, 3), "model saved."]);
  });

  test("a log bigger than the window whose lines are short drops only the cut first line", () => {
    const lines = Array.from({ length: 200_000 }, (_, i) => `2025-01-01 12:00:00 INFO     line ${i}`);
    const path = logFile("many.log", `${lines.join("\n")}\n`);
    expect(tailLines(path, 3)).toEqual(lines.slice(-3));
    const all = tailLines(path, 1_000_000);
    expect(all.length).toBeGreaterThan(MAX_TAIL_BYTES / 50);
    expect(all.length).toBeLessThan(lines.length);
    expect(all).toEqual(lines.slice(-all.length));
  });

  test("a missing log has no lines", () => {
    expect(tailLines(join(dir, "absent.log"), 5)).toEqual([]);
  });
});

describe("tailOf", () => {
  // The last line of a tail, as a reader that goes on from lastLineAt shows it from the bytes there.
  const lastLineFromBytes = (text: string) => {
    const path = logFile("last-line.log", text);
    const tail = tailOf(path, 3);
    const bytes = Buffer.from(text).subarray(tail.lastLineAt).toString();
    return { last: tail.lines.at(-1), fromBytes: screenLine(bytes.split("\n")[0]!) };
  };

  test("points at the start of the tail's last line: a whole one, a bar still drawn, or one before a lone \"\\r\"", () => {
    for (const text of [`${HEAD}model saved.\n`, `${HEAD}${bar(3).slice(0, -1)}`, `${HEAD}épaisseur\n\r`, "one line\n", `${HEAD}${bar(3)}\n`]) {
      const { last, fromBytes } = lastLineFromBytes(text);
      expect(fromBytes).toBe(last!);
    }
    expect(tailOf(logFile("lone.log", `${HEAD}x\n\r`), 3).lastLineAt).toBe(Buffer.byteLength(HEAD));
  });

  test("an empty or missing log points at its start; a line longer than the window, where the read began", () => {
    expect(tailOf(logFile("empty.log", ""), 3)).toEqual({ lines: [], lastLineAt: 0 });
    expect(tailOf(join(dir, "absent.log"), 3)).toEqual({ lines: [], lastLineAt: 0 });
    const text = `${HEAD}${LONG_BAR}`;
    const tail = tailOf(logFile("long-bar-at.log", text), 3);
    expect(tail.lastLineAt).toBeGreaterThan(Buffer.byteLength(HEAD));
    expect(Buffer.byteLength(text) - tail.lastLineAt).toBeLessThanOrEqual(MAX_TAIL_BYTES + 64 * 1024);
  });
});
