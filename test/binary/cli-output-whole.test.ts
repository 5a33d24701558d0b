import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { solidPng } from "../../src/png.ts";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";
import { untilEnded } from "../support/jobs.ts";
import { startWorker } from "../support/worker-process.ts";

const binary = ensureBinary();

// A reader that starts reading a second after the writer began: what a busy CI host's generator step is.
function throughSlowPipe(command: string): { bytes: number; code: number } {
  const res = Bun.spawnSync(["bash", "-c", `${command} | (sleep 1; wc -c); exit "\${PIPESTATUS[0]}"`]);
  return { bytes: Number(res.stdout.toString().trim()), code: res.exitCode };
}

const quoted = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

describe("every command's output reaches a slow reader whole", () => {
  test("lora-worker openapi through a pipe read a second late gives all of its bytes and exits 0", () => {
    const whole = Bun.spawnSync([binary, "openapi"]).stdout.length;
    expect(whole).toBeGreaterThan(65_536);
    expect(throughSlowPipe(`${quoted(binary)} openapi`)).toEqual({ bytes: whole, code: 0 });
  });

  test("a usage error's exit code and the top-level help come through the same pipe", () => {
    const help = Bun.spawnSync([binary, "--help"]).stdout.length;
    expect(throughSlowPipe(`${quoted(binary)} --help`)).toEqual({ bytes: help, code: 0 });
    expect(throughSlowPipe(`${quoted(binary)} jobs --limit 0 2>&1`).code).toBe(2);
  });

  test("contrast: a program that exits at once after writing 100 kB is cut at the pipe's 64 KiB by the same reader", () => {
    const script = `process.stdout.write("x".repeat(100_000)); process.exit(0)`;
    expect(throughSlowPipe(`${quoted(process.execPath)} -e ${quoted(script)}`).bytes).toBeLessThan(100_000);
  });
});

describe("a worker's answers reach a slow reader whole", () => {
  // The client writes synchronously (terminal.ts writeAll); checked to fail where it queues on process.stdout
  // and the entry point ends with process.exit.
  test("logs of a long trainer log and status --json of a large record give all of their bytes", async () => {
    using tree = makeHostTree(0);
    // A trainer log of 3,000 lines (the replay prints it at once and ends as a saved run), and 400 photos of
    // 8 px with long names: the dataset report lists each as small, so the record's JSON passes 64 KiB too.
    const log = join(tree.root, "long-run.log");
    const lines = Array.from({ length: 3000 }, (_, i) => `INFO line ${i} of a long trainer log, as a chatty run prints it`);
    const done = "steps: 100%|██████████| 6/6 [00:01<00:00,  4.00it/s, avr_loss=0.1]";
    writeFileSync(log, `${lines.join("\n")}\n${done}\nmodel saved.\n`);
    for (let i = 0; i < 400; i++) {
      writeFileSync(join(tree.dataset, `photo-${String(i).padStart(4, "0")}-${"a-long-name-".repeat(6)}.png`), solidPng(8, 8, [i % 256, 90, 200]));
    }
    const tables = SIMULATE_TABLES(0.01).replace("[gpu]", `replay_log = ${JSON.stringify(log)}\nreplay_speed = 1000\n[gpu]`);
    await using worker = await startWorker(tree.writeConfig(tables), { command: [binary] });
    const id = (await worker.postTrain(tree.validRequest())).body.worker_job_id as string;
    const end = await untilEnded(worker, id);
    expect({ status: end.status, error: end.error }).toEqual({ status: "succeeded", error: undefined });
    for (const args of [["logs", id, "--lines", "5000"], ["status", id, "--json"]]) {
      const command = [binary, ...args, "--url", worker.url];
      const whole = Bun.spawnSync(command).stdout.length;
      expect(whole).toBeGreaterThan(65_536);
      expect(throughSlowPipe(command.map(quoted).join(" "))).toEqual({ bytes: whole, code: 0 });
    }
  }, 120_000);
});

describe("what the user typed is echoed escaped on a terminal", () => {
  const typed = "--conf\x1b]0;owned\x07ig";
  const onTerminal = (command: string) =>
    Bun.spawnSync(["script", "-qec", command, "/dev/null"], { env: { PATH: process.env.PATH!, TERM: "dumb" } }).stdout.toString();

  test("a mistyped option holding an OSC title sequence is shown in caret notation, not acted on", () => {
    const shown = onTerminal(`${quoted(binary)} status ${quoted(typed)}`);
    expect(shown).toContain("unknown option --conf^[]0;owned^Gig");
    expect(shown).not.toContain("\x1b]0;owned");
  });

  test("contrast: the same bytes printed raw reach the terminal raw", () => {
    expect(onTerminal(`printf '%s\\n' ${quoted(typed)}`)).toContain("\x1b]0;owned\x07");
  });
});
