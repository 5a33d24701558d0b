import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";

// Real processes on a shared 2-core machine: generous bounds, conditions waited on, never slept.
setDefaultTimeout(60_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

// What systemd puts in JOURNAL_STREAM for the journal's socket: the stream's device and inode, as stat(1) prints them.
function deviceInode(path: string): string {
  const res = Bun.spawnSync(["stat", "-Lc", "%d:%i", path]);
  if (res.exitCode !== 0) throw new Error(`stat ${path}: ${res.stderr}`);
  return res.stdout.toString().trim();
}

type JournalStream = "this file" | "another file" | "unset";

interface Captured {
  proc: ReturnType<typeof Bun.spawn>;
  lines(): string[];
}

// The worker with stdout and stderr on one file, as under the unit (StandardError=inherit), and JOURNAL_STREAM
// naming that file (so the worker takes it for the journal's socket), naming another file, or unset.
function spawnIntoFile(tree: HostTree, name: string, args: string[], journal: JournalStream): Captured {
  const path = join(tree.root, name);
  const other = join(tree.root, `${name}.other`);
  writeFileSync(other, "");
  const fd = openSync(path, "w");
  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
  if (journal !== "unset") env.JOURNAL_STREAM = deviceInode(journal === "this file" ? path : other);
  const proc = Bun.spawn([binary, ...args], { stdout: fd, stderr: fd, env });
  closeSync(fd);
  return { proc, lines: () => readFileSync(path, "utf8").split("\n").filter((l) => l !== "") };
}

interface Line {
  priority: string | null;
  record: Record<string, any>;
}

// Each line as journald would store it: the priority prefix (if any) apart, the rest one JSON object.
function parse(lines: string[]): Line[] {
  return lines.map((line) => {
    const prefix = /^<\d>/.exec(line)?.[0] ?? null;
    return { priority: prefix, record: JSON.parse(prefix ? line.slice(prefix.length) : line) };
  });
}

// One problem only: an unknown key (simulate mode needs no trainer on this host).
const BAD_CONFIG = 'bogus = 1\n[trainer]\nmode = "simulate"\n';

// Exit with status 1 at the second step: the job ends failed.
const FAILING_CONFIG = (tree: HostTree) =>
  tree.writeConfig(`[trainer]\nmode = "simulate"\n[simulate]\nseconds_per_step = 0.01\nfail = "exit@2:1"\n[gpu]\nnvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}\n`);

// Starts a worker, runs one job to its failure and leaves the worker running (the caller kills it).
async function runFailingJob(tree: HostTree, journal: JournalStream): Promise<Captured> {
  const worker = spawnIntoFile(tree, `worker-${journal.replace(" ", "-")}.log`, ["serve", "--config", FAILING_CONFIG(tree)], journal);
  const url = await waitFor(() => {
    if (worker.proc.exitCode !== null) throw new Error(`worker exited ${worker.proc.exitCode}: ${worker.lines().join("\n")}`);
    return /"msg":"listening","url":"([^"]+)"/.exec(worker.lines().join("\n"))?.[1];
  }, "the worker to listen");
  const res = await fetch(`${url}/train`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tree.validRequest()) });
  expect(res.status).toBe(200);
  await waitFor(() => worker.lines().some((l) => l.includes('"msg":"job ended"')), "the job's end in the log");
  return worker;
}

describe("logs when stdout is the journal's stream", () => {
  test("every line is its syslog priority and one JSON object; a failed job's end is a warning, a second worker's refusal an error", async () => {
    using tree = makeHostTree();
    const worker = await runFailingJob(tree, "this file");
    const second = spawnIntoFile(tree, "second.log", ["serve", "--config", tree.configPath], "this file");
    expect(await second.proc.exited).toBe(73);
    worker.proc.kill("SIGKILL");
    await worker.proc.exited;

    const lines = worker.lines();
    expect(lines.filter((l) => !/^<[346]>\{/.test(l))).toEqual([]);
    const byMsg = Object.fromEntries(parse(lines).map(({ priority, record }) => [record.msg, { priority, level: record.level }]));
    expect(byMsg).toMatchObject({
      listening: { priority: "<6>", level: "info" },
      "trainer mode is SIMULATE: no real training happens and every job is marked simulated": { priority: "<4>", level: "warn" },
      "job started": { priority: "<6>", level: "info" },
      "job ended": { priority: "<4>", level: "warn" },
    });
    expect(parse(lines).find((l) => l.record.msg === "job ended")!.record).toMatchObject({ status: "failed", error_code: "trainer_crashed", exit_code: 1 });
    expect(parse(second.lines())).toEqual([
      {
        priority: "<3>",
        record: { ts: expect.any(String), level: "error", msg: "refusing to start: the state directory is in use", errors: [expect.stringContaining("another lora-worker (pid ")], exit_code: 73 },
      },
    ]);
  });

  test("contrast: the same run without JOURNAL_STREAM, or with it naming another stream, writes bare JSON lines", async () => {
    for (const journal of ["unset", "another file"] as const) {
      using tree = makeHostTree();
      const worker = await runFailingJob(tree, journal);
      worker.proc.kill("SIGKILL");
      await worker.proc.exited;
      const lines = worker.lines();
      expect({ journal, prefixed: lines.filter((l) => !l.startsWith("{")) }).toEqual({ journal, prefixed: [] });
      expect(parse(lines).find((l) => l.record.msg === "job ended")).toMatchObject({ priority: null, record: { level: "warn", status: "failed" } });
    }
  });
});

describe("a refusal to start", () => {
  test("on the journal's stream is one error line: <3> and a JSON object with the problems and the exit code", async () => {
    using tree = makeHostTree();
    const run = spawnIntoFile(tree, "refusal.log", ["serve", "--config", tree.writeConfig(BAD_CONFIG)], "this file");
    expect(await run.proc.exited).toBe(78);
    expect(parse(run.lines())).toEqual([
      {
        priority: "<3>",
        record: { ts: expect.any(String), level: "error", msg: "refusing to start: the configuration is invalid", errors: ["bogus: unknown key"], exit_code: 78 },
      },
    ]);
  });

  test("contrast: on a stderr that is not the journal's stream it is bare JSON, even with JOURNAL_STREAM naming stdout", async () => {
    using tree = makeHostTree();
    const stdout = join(tree.root, "stdout.log");
    const fd = openSync(stdout, "w");
    const proc = Bun.spawn([binary, "serve", "--config", tree.writeConfig(BAD_CONFIG)], { stdout: fd, stderr: "pipe", env: { PATH: process.env.PATH!, JOURNAL_STREAM: deviceInode(stdout) } });
    closeSync(fd);
    expect(await proc.exited).toBe(78);
    const stderr = await new Response(proc.stderr).text();
    expect(stderr).toStartWith("{");
    expect(JSON.parse(stderr)).toMatchObject({ level: "error", msg: "refusing to start: the configuration is invalid", errors: ["bogus: unknown key"] });
  });

  test("contrast: on a terminal it reads as a sentence, its one problem on the same line", async () => {
    using tree = makeHostTree();
    const config = tree.writeConfig(BAD_CONFIG);
    const script = Bun.spawn(["script", "-qec", `${binary} serve --config ${config}`, "/dev/null"], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! } });
    const out = (await new Response(script.stdout).text()).replaceAll("\r\n", "\n");
    expect(await script.exited).toBe(78);
    expect(out).toBe("lora-worker: refusing to start, the configuration is invalid: bogus: unknown key\n");
  });
});
