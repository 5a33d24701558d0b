import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../support/binary.ts";
import { makeHostTree, SIMULATE_TABLES } from "../support/host-tree.ts";

const binary = ensureBinary();
// A binary that opened the FIFO would wait for a writer for ever: killed here, it fails on its exit code.
const DEADLINE_MS = 20_000;

async function run(...args: string[]) {
  const proc = Bun.spawn([binary, ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH! }, timeout: DEADLINE_MS });
  const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
  return { code, stderr };
}

// The refusal's one line on a stderr that is not a terminal: the logger's JSON.
function refusal(answer: { code: number; stderr: string }) {
  const line = JSON.parse(answer.stderr) as { msg: string; errors: string[]; exit_code: number };
  return { code: answer.code, msg: line.msg, errors: line.errors, exit_code: line.exit_code };
}

const refused = (path: string, what: string) => ({
  code: 78, msg: "refusing to start: the configuration is invalid", exit_code: 78,
  errors: [`config file ${path} is ${what}, not a regular file: name the config file itself`],
});

describe("--config that is not a regular file", () => {
  test("a FIFO, a directory and a character device are refused before they are opened, exit 78; the same text in a file loads", async () => {
    using tree = makeHostTree();
    const file = tree.writeConfig(SIMULATE_TABLES(0.01));
    const fifo = join(tree.root, "config.fifo");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const dir = join(tree.root, "config.d");
    mkdirSync(dir);
    for (const command of [["serve"], ["tokenizers", "check"]]) {
      expect(refusal(await run(...command, "--config", fifo))).toEqual(refused(fifo, "a named pipe (FIFO)"));
    }
    expect(refusal(await run("tokenizers", "check", "--config", dir))).toEqual(refused(dir, "a directory"));
    const device = await run("tokenizers", "check", "--config", "/dev/zero");
    expect(refusal(device)).toEqual(refused("/dev/zero", "a character device"));

    const copy = join(tree.root, "copy.toml");
    writeFileSync(copy, readFileSync(file));
    const loaded = await run("tokenizers", "check", "--config", copy);
    expect(loaded.code).toBe(1);
    expect(loaded.stderr).toStartWith(`tokenizers not ready in ${join(tree.state, "tokenizers")}:\n`);
  }, 60_000);
});
