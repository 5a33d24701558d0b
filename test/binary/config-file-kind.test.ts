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

// tokenizers starts nothing: its refusal is a sentence naming the config, then the fix.
const tokenizersRefused = (path: string, what: string) => ({
  code: 78,
  stderr: `tokenizers: the config ${path} is invalid: config file ${path} is ${what}, not a regular file: name ` +
    `the config file itself\nfix: make ${path} the worker's config, valid TOML (\`lora-worker config template\` ` +
    "gives each key's meaning and default)\n",
});

describe("--config that is not a regular file", () => {
  test("a FIFO, a directory and a character device are refused before they are opened, exit 78; the same text in a file loads", async () => {
    using tree = makeHostTree();
    const file = tree.writeConfig(SIMULATE_TABLES(0.01));
    const fifo = join(tree.root, "config.fifo");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const dir = join(tree.root, "config.d");
    mkdirSync(dir);
    expect(refusal(await run("serve", "--config", fifo))).toEqual(refused(fifo, "a named pipe (FIFO)"));
    expect(await run("tokenizers", "check", "--config", fifo)).toEqual(tokenizersRefused(fifo, "a named pipe (FIFO)"));
    expect(await run("tokenizers", "check", "--config", dir)).toEqual(tokenizersRefused(dir, "a directory"));
    const device = await run("tokenizers", "check", "--config", "/dev/zero");
    expect(device).toEqual(tokenizersRefused("/dev/zero", "a character device"));

    const copy = join(tree.root, "copy.toml");
    writeFileSync(copy, readFileSync(file));
    const loaded = await run("tokenizers", "check", "--config", copy);
    expect(loaded.code).toBe(1);
    expect(loaded.stderr).toStartWith(`tokenizers not ready in ${join(tree.state, "tokenizers")}:\n`);
  }, 60_000);
});
