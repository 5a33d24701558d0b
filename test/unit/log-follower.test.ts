import { afterAll, describe, expect, test } from "bun:test";
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { followLog, SLICE_BYTES } from "../../src/supervisor/job-log.ts";
import { capLog, logCutsPath, repairedCuts } from "../../src/job-dir/log-cut.ts";
import { waitFor } from "../support/wait.ts";

const MiB = 2 ** 20;
const dir = mkdtempSync(join(tmpdir(), "log-follower-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// tqdm's redraws, "█" included: a 3-byte character that read boundaries are bound to split.
function redraws(bytes: number): string {
  const one = (n: number) => `\rsteps:  42%|████▏     | ${n}/100000 [00:10<00:14, 4.02it/s, avr_loss=0.0${n % 997}]`;
  const parts: string[] = [];
  for (let n = 0, size = 0; size < bytes; n++) size += Buffer.byteLength(parts[parts.push(one(n)) - 1]!);
  return `${parts.join("")}\n`;
}

function logFile(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

// The pace the supervisor gives a job an event stream follows.
const TICK_MS = 100;

function collect(path: string, interval = () => TICK_MS) {
  const chunks: string[] = [];
  let chars = 0;
  const follower = followLog(path, (text) => {
    chunks.push(text);
    chars += text.length;
  }, interval);
  return { follower, chunks, chars: () => chars, text: () => chunks.join("") };
}

// How many characters had been handed on when an HTTP request to a server in this process was answered.
async function charsWhenAnswered(chars: () => number, startReading: () => void): Promise<number> {
  using server = Bun.serve({ port: 0, fetch: () => new Response("ok") });
  const answered = fetch(server.url).then(async (res) => (await res.text(), chars()));
  startReading();
  return await answered;
}

// This process's descriptors open on `path`.
function fdsOn(path: string): number {
  return readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  }).length;
}

describe("followLog", () => {
  const flood = redraws(48 * MiB);

  test("an HTTP request is answered while a 48 MiB backlog is still being read, and every byte arrives once, in order", async () => {
    const log = collect(logFile("paced.log", flood));
    const atAnswer = await charsWhenAnswered(log.chars, log.follower.drain);
    expect(atAnswer).toBeGreaterThan(0);
    expect(atAnswer).toBeLessThan(flood.length / 2);
    await waitFor(() => log.chars() === flood.length, "the whole backlog");
    expect(log.text() === flood).toBe(true);
    await log.follower.stop();
  });

  test("stop() at a run's end with a 48 MiB backlog nobody read: a request is answered while it reads, and it ends with every byte", async () => {
    const log = collect(logFile("final.log", flood));
    let stopped: Promise<void> = Promise.resolve();
    const atAnswer = await charsWhenAnswered(log.chars, () => (stopped = log.follower.stop()));
    expect(atAnswer).toBeLessThan(flood.length / 2);
    await stopped;
    expect(log.text() === flood).toBe(true);
  });

  test("contrast: reading the same backlog to EOF in one go answers the request only after the last byte", async () => {
    const path = logFile("unpaced.log", flood);
    let chars = 0;
    const atAnswer = await charsWhenAnswered(() => chars, () => (chars = readFileSync(path, "utf8").length));
    expect(atAnswer).toBe(flood.length);
  });

  test("stop() hands on everything written up to it before it resolves, where drain() hands on one slice", async () => {
    const text = redraws(4 * MiB);
    const log = collect(logFile("stop.log", ""));
    appendFileSync(join(dir, "stop.log"), text);
    log.follower.drain();
    const afterDrain = log.text();
    await log.follower.stop();
    expect(Buffer.byteLength(afterDrain)).toBeLessThanOrEqual(SLICE_BYTES);
    expect(afterDrain.length).toBeLessThan(text.length);
    expect(log.text() === text).toBe(true);
  });

  test("appends are picked up without a drain call, and after the shim cuts the log the follower reads on from the new end", async () => {
    const path = logFile("capped.log", "");
    const log = collect(path);
    appendFileSync(path, "before the cut\n");
    await waitFor(() => log.text() === "before the cut\n", "the first line");
    truncateSync(path, 0);
    log.follower.drain();
    appendFileSync(path, "after\n");
    await waitFor(() => log.text().endsWith("after\n"), "the line written after the cut");
    await log.follower.stop();
    expect(log.text()).toBe("before the cut\nafter\n");
    // Contrast: a reader that kept its old offset would find nothing there.
    expect(await Bun.file(path).slice("before the cut\n".length).text()).toBe("");
  });

  // Numbered lines of 11 bytes: what was skipped or read twice shows in the numbers.
  const numbered = (from: number, to: number) =>
    Array.from({ length: to - from }, (_, i) => `line ${String(from + i).padStart(5, "0")}\n`).join("");
  const CAP = 4096;

  // Cut by the shim (a 4 KiB cap), then grown past the follower's offset before it looks again.
  async function cutUnderFollower(name: string, recorded: boolean): Promise<{ read: string; file: string }> {
    const path = logFile(name, "");
    repairedCuts(path, CAP); // the record as the shim makes it before the trainer starts
    const log = collect(path, () => 60_000); // looks only when asked
    appendFileSync(path, numbered(0, 500));
    log.follower.drain();
    expect(log.text()).toBe(numbered(0, 500));
    expect(capLog(path, CAP)).toBeGreaterThan(0);
    if (!recorded) rmSync(logCutsPath(path)); // as an older shim, which kept no record of its cuts
    appendFileSync(path, numbered(500, 900));
    log.follower.drain();
    await log.follower.stop();
    return { read: log.text().slice(numbered(0, 500).length), file: readFileSync(path, "utf8") };
  }

  test("a cut the log regrew past between two looks is carried across by its record: the follower reads on from what it had read", async () => {
    const { read, file } = await cutUnderFollower("cut-and-regrown.log", true);
    expect(read).toBe(numbered(500, 900));
    // Contrast: the bytes at the follower's old offset are others (the regrown log's middle).
    expect(file.slice(numbered(0, 500).length)).not.toBe(numbered(500, 900));
  });

  test("contrast: without the record, the follower's offset lands in the regrown log's middle and skips lines", async () => {
    const { read } = await cutUnderFollower("cut-unrecorded.log", false);
    expect(read).not.toBe(numbered(500, 900));
    expect(numbered(500, 900).endsWith(read)).toBe(true);
  });

  test("the pace is asked at each look, and a look on demand starts the next interval over at the pace asked now", async () => {
    const path = logFile("paced-by-caller.log", "");
    let pace = 60_000;
    const log = collect(path, () => pace);
    appendFileSync(path, "read on demand\n");
    log.follower.drain();
    expect(log.text()).toBe("read on demand\n");
    pace = 20;
    log.follower.drain();
    appendFileSync(path, "read by the quicker tick\n");
    await waitFor(() => log.text().endsWith("read by the quicker tick\n"), "the line after the pace quickened");
    // Contrast: back at a minute's pace, what is appended after a look waits for the next one.
    pace = 60_000;
    log.follower.drain();
    appendFileSync(path, "not yet\n");
    await Bun.sleep(300);
    expect(log.text().endsWith("not yet\n")).toBe(false);
    log.follower.drain();
    expect(log.text().endsWith("not yet\n")).toBe(true);
    await log.follower.stop();
  });

  test("stop() closes the log even when the text handler throws on the last words", async () => {
    const path = logFile("throwing.log", "last words\n");
    const follower = followLog(path, () => {
      throw new Error("the database is full");
    }, () => TICK_MS);
    expect(fdsOn(path)).toBe(1);
    await expect(follower.stop()).rejects.toThrow("the database is full");
    expect(fdsOn(path)).toBe(0);
  });
});
