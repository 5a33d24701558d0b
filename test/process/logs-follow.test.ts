import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { decodeCuts } from "../../src/job-dir/log-cut.ts";
import { runCli, spawnCli } from "../support/cli-process.ts";
import { FAKE_NVIDIA_SMI, MAIN, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { fedTrainer } from "../support/fed-trainer.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";

// `lora-worker logs -f` from source, against a worker process on port 0 running a trainer the test feeds, under a
// real shim that cuts the log at 1 MiB.
setDefaultTimeout(60_000);

const CAP = 1 << 20;
const CLI = [process.execPath, MAIN];

function fedWorkerConfig(tree: HostTree) {
  const fed = fedTrainer(tree);
  const { trainer } = fed;
  const sdScripts = join(tree.root, "sd-scripts");
  mkdirSync(sdScripts);
  writeFileSync(join(sdScripts, "sdxl_train_network.py"), "");
  const tables = [
    "[trainer]",
    'mode = "real"',
    `accelerate = ${JSON.stringify(trainer)}`,
    `sd_scripts_dir = ${JSON.stringify(sdScripts)}`,
    "cancel_grace_seconds = 0.5",
    `log_max_bytes = ${CAP}`,
    "[gpu]",
    `nvidia_smi = ${JSON.stringify(FAKE_NVIDIA_SMI)}`,
    "",
  ].join("\n");
  return {
    config: tree.writeConfig(tables),
    // Each ends with a step of the bar, so the job's record changes and its event stream (which logs -f reads on)
    // says so.
    feed: (text: string) =>
      fed.feed(`${text}\rsteps:  0%|          | ${fed.fed() + 1}/400 [00:01<00:04,  1.00s/it, avr_loss=0.5]\n`),
    end: fed.end,
  };
}

// Numbered lines of 100 bytes.
const lines = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => `line ${String(from + i).padStart(8, "0")} ${"x".repeat(85)}`);
const text = (numbered: string[]) => numbered.map((l) => `${l}\n`).join("");

describe("logs -f", () => {
  test("prints every line once, across several writes and across the shim's cut of the log, which it notes on stderr", async () => {
    using tree = makeHostTree();
    const job = fedWorkerConfig(tree);
    await using worker = await startWorker(job.config);
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    const log = join(tree.state, "jobs", id, "train.log");
    const written: string[] = [];
    const write = (numbered: string[]) => {
      written.push(...numbered);
      job.feed(text(numbered));
    };
    write(lines(0, 3));
    await waitFor(() => existsSync(log) && readFileSync(log, "utf8").includes(written.at(-1)!), "the first lines in the log");
    await using follow = spawnCli(CLI[0]!, [CLI[1]!, "logs", id, "-f"], { LORA_WORKER_URL: worker.url });
    // Several writes, each printed before the next.
    for (let i = 0; i < 4; i++) {
      write(lines(3 + i * 5, 5));
      await follow.waitForOutput(new RegExp(`^${written.at(-1)}$`, "m"), `write ${i} printed`);
    }
    // 900 kB, read; then 150 kB more takes the log past its cap: the shim cuts it, keeping its last 256 KiB, and
    // the cursor logs -f holds lies in what is kept whether it read the 150 kB before the cut or not.
    write(lines(23, 9000));
    await follow.waitForOutput(new RegExp(`^${written.at(-1)}$`, "m"), "the 900 kB printed");
    write(lines(9023, 1500));
    await waitFor(() => decodeCuts(readFileSync(`${log}.cuts`, "utf8"))?.generation !== "0", "the shim to cut the log");
    expect(statSync(log).size).toBeLessThan(CAP);
    // Drained at the job's end: the worker's own follower can miss what is written right after a cut (it takes a
    // log shorter than its offset for a cut and goes on from its end), so no event may announce these lines.
    write(lines(10_523, 3));
    job.end();
    const done = await follow.done();

    expect(done.exitCode).toBe(1); // the fed trainer exits 0 without a LoRA: output_missing
    const printed = done.stdout.split("\n").filter((l) => l.startsWith("line "));
    expect(printed).toEqual(written);
    expect(done.stdout.split("\n").filter((l) => l.startsWith("steps:")).length).toBeGreaterThanOrEqual(7);
    expect(done.stderr).toBe(`lora-worker logs: the worker cut job ${id}'s log to its cap since the last read; going on from what the cut kept\n`);
    // Contrast: the log no longer holds the lines the cut dropped, which logs -f printed once, as they came.
    const tail = await runCli(CLI[0]!, [CLI[1]!, "logs", id, "--lines", "5000"], { LORA_WORKER_URL: worker.url });
    expect(tail.stdout).toContain("bytes of trainer output dropped here");
    expect(tail.stdout).not.toContain(`${lines(3000, 1)[0]}\n`);
  });

  test("refuses clearly when the worker hands out no cursor (an older worker), instead of printing lines twice", async () => {
    const older = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) => new URL(req.url).pathname.endsWith("/log")
        ? new Response("epoch 1/1\n", { headers: { "content-type": "text/plain" } })
        : Response.json({ detail: "no such route" }, { status: 404 }),
    });
    try {
      const id = "3f1c2a4e-0000-4000-8000-000000000000";
      const run = await runCli(CLI[0]!, [CLI[1]!, "logs", id, "-f"], { LORA_WORKER_URL: older.url.origin });
      expect(run).toEqual({
        exitCode: 5,
        stdout: "",
        stderr: `lora-worker logs: the worker at ${older.url.origin} hands out no cursor to follow job ${id}'s log by ` +
          "(a worker older than this client, a run an older worker started, or a cut of the log that never finished); " +
          `lora-worker logs ${id} prints its tail\n`,
      });
      // Contrast: without -f the same worker's tail is printed.
      expect(await runCli(CLI[0]!, [CLI[1]!, "logs", id], { LORA_WORKER_URL: older.url.origin })).toEqual({ exitCode: 0, stdout: "epoch 1/1\n", stderr: "" });
    } finally {
      older.stop(true);
    }
  });
});
