import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { fakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { FAKE_NVIDIA_SMI, makeHostTree, SIMULATE_TABLES, type HostTree } from "../support/host-tree.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker, type WorkerProcess } from "../support/worker-process.ts";

const binary = ensureBinary();
const LONG_NAME = "a_rather_long_output_name_for_a_narrow_terminal";
const ISO_DATE = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/;
// What the CLI redraws a live line with: back to column 0 and clear it, or first up over the rows it wraps to.
const REDRAW = /\r\x1b\[2K|\x1b\[\d+A\r\x1b\[J/;

const env = (worker: WorkerProcess) => ({ PATH: process.env.PATH ?? "/usr/bin:/bin", LORA_WORKER_URL: worker.url });
const quoted = (args: string[]) => args.map((a) => `'${a}'`).join(" ");
const ptyCommand = (columns: number, args: string[], before = "") => `stty cols ${columns} rows 40; ${before}exec ${quoted([binary, ...args])}`;
const widest = (lines: string[]) => Math.max(...lines.map((l) => Bun.stringWidth(l)));

/** The binary's client command on a pseudo-terminal `columns` wide: the lines the terminal got. */
function onTerminal(worker: WorkerProcess, columns: number, args: string[]): { exitCode: number; lines: string[] } {
  const run = Bun.spawnSync(["script", "-qec", ptyCommand(columns, args), "/dev/null"], { env: env(worker) });
  return { exitCode: run.exitCode, lines: run.stdout.toString().replace(/\r\n$/, "").split("\r\n") };
}

/** Each text a live line was drawn or redrawn with, in order. */
const redraws = (screen: string) => screen.split(REDRAW).slice(1).map((r) => r.split("\r\n")[0]!);

function requestFile(tree: HostTree, overrides: Record<string, unknown>): string {
  const path = join(tree.root, `request-${String(overrides.output_name)}.json`);
  writeFileSync(path, JSON.stringify(tree.validRequest(overrides)));
  return path;
}

async function runJob(worker: WorkerProcess, tree: HostTree, outputName: string): Promise<string> {
  const posted = await worker.postTrain(tree.validRequest({ output_name: outputName }));
  expect(posted.status).toBe(200);
  const id: string = posted.body.worker_job_id;
  await waitFor(async () => !["starting", "training"].includes((await worker.json(`/train/${id}`)).body.status), `job ${outputName} to end`);
  return id;
}

describe("the CLI on narrow terminals", () => {
  test("jobs fits 60 and 80 columns by shortening and dropping columns; at 200 every column shows", async () => {
    using tree = makeHostTree();
    let failed: string;
    {
      await using failing = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01).replace("[simulate]\n", '[simulate]\nfail = "exit@3:1"\n')), { command: [binary] });
      failed = await runJob(failing, tree, "short");
    }
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    const succeeded = await runJob(worker, tree, LONG_NAME);

    const [narrow, medium, wide] = [onTerminal(worker, 60, ["jobs"]), onTerminal(worker, 80, ["jobs"]), onTerminal(worker, 200, ["jobs"])];
    expect([narrow.exitCode, medium.exitCode, wide.exitCode]).toEqual([0, 0, 0]);
    expect(widest(narrow.lines)).toBeLessThanOrEqual(60);
    expect(widest(medium.lines)).toBeLessThanOrEqual(80);
    // The output name and the error code stay; the id is shortened to what every command still takes. The
    // header loses the same columns as the rows do.
    expect(narrow.lines).toEqual([
      expect.stringMatching(/^ID +STATUS +STEPS +OUTPUT +ERROR$/),
      expect.stringMatching(new RegExp(`^${succeeded.slice(0, 8)}  succeeded +400/400  a_rather_long_output_name_f\\S*…$`)),
      expect.stringMatching(new RegExp(`^${failed.slice(0, 8)}  failed +\\d+/400  short +trainer_crashed$`)),
    ]);
    expect(medium.lines).toEqual([
      expect.stringMatching(/^ID +STATUS +STEPS +OUTPUT +ERROR$/),
      expect.stringMatching(new RegExp(`^${succeeded.slice(0, 8)}  succeeded +400/400  a_rather_long_output_name_for_a_narrow_terminal$`)),
      expect.stringMatching(new RegExp(`^${failed.slice(0, 8)}  failed +\\d+/400  short +trainer_crashed$`)),
    ]);
    const byShortId = onTerminal(worker, 60, ["status", failed.slice(0, 8)]);
    expect(byShortId.lines[0]).toBe(`job      ${failed}`);

    // The contrast: wide enough, the whole rows, as a pipe gets them, under every column's name.
    expect(wide.lines).toEqual([
      expect.stringMatching(/^ID +STATUS +STEPS +LOSS +TIER@DEVICE +CREATED +OUTPUT +ERROR$/),
      expect.stringMatching(new RegExp(`^${succeeded}  succeeded +400/400  \\d\\.\\d{4}  fast@0 +${ISO_DATE.source}  ${LONG_NAME}$`)),
      expect.stringMatching(new RegExp(`^${failed}  failed +\\d+/400  \\S+ +fast@0 +${ISO_DATE.source}  short +trainer_crashed$`)),
    ]);
    // Each header names the column under it: it starts where the rows' cells start.
    for (const { lines } of [narrow, medium, wide]) {
      const [header, , failedRow] = lines as [string, string, string];
      expect(header.indexOf("OUTPUT")).toBe(failedRow.indexOf("short"));
      expect(header.indexOf("ERROR")).toBe(failedRow.indexOf("trainer_crashed"));
      expect(header.indexOf("STEPS") + "STEPS".length).toBe(failedRow.indexOf("/400") + "/400".length);
    }
    expect(wide.lines[0]!.indexOf("CREATED")).toBe(wide.lines[2]!.search(ISO_DATE));
    expect(widest(wide.lines)).toBeGreaterThan(100);
  }, 60_000);

  test("gpu fits 60 and 80 columns, the co-tenant still marked; at 200 the full names, amounts and summary show", async () => {
    using tree = makeHostTree();
    const tts = fakeNvidiaSmi(tree.root, "two-gpus-tts").path;
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01).replace(JSON.stringify(FAKE_NVIDIA_SMI), JSON.stringify(tts))), { command: [binary] });
    const [narrow, medium, wide] = [onTerminal(worker, 60, ["gpu"]), onTerminal(worker, 80, ["gpu"]), onTerminal(worker, 200, ["gpu"])];
    expect([narrow.exitCode, medium.exitCode, wide.exitCode]).toEqual([0, 0, 0]);
    expect(widest(narrow.lines)).toBeLessThanOrEqual(60);
    expect(widest(medium.lines)).toBeLessThanOrEqual(80);
    for (const { lines } of [narrow, medium]) {
      expect(lines[1]).toMatch(/^0 +RTX 3090 +[█▌░]+ .*21232 MiB +7%$/);
      expect(lines[2]).toMatch(/^ +pid 48213 +3000 MiB +python3 .*\[co-tenant\]$/);
      expect(lines.slice(4).join(" ")).toContain("tts_on_3090");
    }
    expect(narrow.lines[0]).not.toContain("USED / TOTAL");
    expect(medium.lines[0]).toContain("USED / TOTAL");

    expect(wide.lines[0]).toMatch(/^GPU +NAME +VRAM USED +USED \/ TOTAL +FREE +UTIL$/);
    expect(wide.lines[1]).toMatch(/^0 +NVIDIA GeForce RTX 3090 +██▌░{17} +3012 \/  24576 MiB +21232 MiB +7%$/);
    expect(wide.lines.at(-1)).toBe("co-tenants: python3 /opt/tts/server.py (pid 48213, 3000 MiB) on GPU 0 — tts_on_3090: training on the 24 GB card competes with it");
  }, 60_000);

  test("status of an active job on a terminal prints one snapshot and how to follow it; --follow draws it live", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01).replace("[simulate]\n", '[simulate]\nfail = "hang@5"\n')), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    await waitFor(async () => (await worker.json(`/train/${id}`)).body.step >= 4, "the job's steps before its hang");
    const snapshot = onTerminal(worker, 100, ["status", id]);
    expect(snapshot.exitCode).toBe(0);
    expect(snapshot.lines[0]).toBe(`job      ${id}`);
    expect(snapshot.lines.at(-1)).toBe(`follow with: lora-worker status ${id} --follow`);
    expect(snapshot.lines.join("\n")).not.toMatch(REDRAW);

    // Contrast: with --follow it keeps drawing until the job ends (here, a cancel from outside).
    const follower = Bun.spawn(["script", "-qefc", ptyCommand(100, ["status", id, "--follow"]), "/dev/null"], { env: env(worker), stdout: "pipe" });
    let screen = "";
    const reading = (async () => {
      for await (const chunk of follower.stdout) screen += new TextDecoder().decode(chunk);
    })();
    await waitFor(() => redraws(screen).some((r) => /^training /.test(r)), "the live bar");
    await worker.json(`/train/${id}/cancel`, { method: "POST" });
    expect(await follower.exited).toBe(3);
    await reading;
    expect(screen).toContain("cancelled");
  }, 60_000);

  test("submit --follow draws its bar within 60 and 80 columns", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01)), { command: [binary] });
    for (const columns of [60, 80]) {
      const name = `bar${columns}`;
      const run = Bun.spawnSync(["script", "-qec", ptyCommand(columns, ["submit", requestFile(tree, { output_name: name }), "--follow"]), "/dev/null"], { env: env(worker) });
      expect(run.exitCode).toBe(0);
      const drawn = redraws(run.stdout.toString());
      expect(drawn.length).toBeGreaterThanOrEqual(3);
      expect(widest(drawn)).toBeLessThan(columns);
      expect(drawn.at(-1)).toMatch(/^succeeded +█+ +400\/400 +100%/);
    }
  }, 60_000);

  test("the live bar is redrawn to the new width when the window narrows, over the rows the wide one now wraps to", async () => {
    using tree = makeHostTree();
    await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.01).replace("[simulate]\n", '[simulate]\nfail = "hang@5"\n')), { command: [binary] });
    const ttyFile = join(tree.root, "tty");
    const command = ptyCommand(120, ["submit", requestFile(tree, { output_name: "resized" }), "--follow"], `tty > '${ttyFile}'; `);
    const follower = Bun.spawn(["script", "-qefc", command, "/dev/null"], { env: env(worker), stdout: "pipe" });
    let screen = "";
    void (async () => {
      for await (const chunk of follower.stdout) screen += new TextDecoder().decode(chunk);
    })();
    try {
      const id = (await waitFor(() => /job (\S+) submitted/.exec(screen), "the job id"))[1]!;
      await waitFor(() => redraws(screen).some((r) => /^training .* [1-9]\/400 /.test(r)), "a training bar before the hang at step 5");
      const before = redraws(screen);
      const mark = screen.length;
      const pty = readFileSync(ttyFile, "utf8").trim();
      expect(Bun.spawnSync(["stty", "-F", pty, "cols", "60"]).exitCode).toBe(0);
      // The trainer hangs: no event comes, so only the resize can draw this.
      const after = await waitFor(() => (REDRAW.test(screen.slice(mark)) ? screen.slice(mark) : null), "a redraw after the resize");

      expect(widest(before)).toBeGreaterThan(60);
      const rows = Math.ceil(Bun.stringWidth(before.at(-1)!) / 60);
      expect(after).toStartWith(`\x1b[${rows - 1}A\r\x1b[J`);
      expect(widest(redraws(after))).toBeLessThan(60);
      expect(redraws(after)[0]).toMatch(/^training .* [1-9]\/400 /);

      expect((await worker.json(`/train/${id}/cancel`, { method: "POST" })).status).toBe(200);
      expect(await follower.exited).toBe(3);
    } finally {
      follower.kill("SIGKILL");
    }
  }, 60_000);
});
