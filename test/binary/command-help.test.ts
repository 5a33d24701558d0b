import { describe, expect, test } from "bun:test";
import { ensureBinary } from "../support/binary.ts";
import { runCli } from "../support/cli-process.ts";

const binary = ensureBinary();

// Every command the top-level help lists, as an operator types it, with the usage line its help starts with.
const COMMANDS: Array<[string[], string]> = [
  [["serve"], "serve"], [["plan"], "plan"], [["doctor"], "doctor"], [["tokenizers"], "tokenizers import"],
  [["tokenizers", "import"], "tokenizers import"], [["tokenizers", "check"], "tokenizers import"],
  [["trainer"], "trainer bundle"], [["trainer", "bundle"], "trainer bundle"], [["trainer", "install"], "trainer bundle"],
  [["trainer", "check"], "trainer bundle"], [["config"], "config template"], [["config", "template"], "config template"], [["launch"], "launch"],
  [["shim"], "shim"], [["submit"], "submit"], [["status"], "status"], [["jobs"], "jobs"], [["logs"], "logs"],
  [["cancel"], "cancel"], [["pause"], "pause"], [["resume"], "resume"], [["gpu"], "gpu"], [["smoke"], "smoke"],
];

describe("each command's --help", () => {
  test("prints that command's own usage on stdout and exits 0, without a config, a worker or a state dir", async () => {
    const answers = await Promise.all(COMMANDS.map(([words]) => runCli(binary, [...words, "--help"], { LORA_WORKER_CONFIG: "/nonexistent/config.toml" })));
    const seen = answers.map((a, i) => ({ command: COMMANDS[i]![0].join(" "), exitCode: a.exitCode, stderr: a.stderr, usage: new RegExp(`^Usage: lora-worker ${COMMANDS[i]![1]}[ \n]`).test(a.stdout) }));
    const want = COMMANDS.map(([words]) => ({ command: words.join(" "), exitCode: 0, stderr: "", usage: true }));
    expect(seen).toEqual(want);
  }, 60_000);

  test("-h is the same, and an unknown option is still a usage error naming it (the contrast)", async () => {
    const [short, long, unknown] = await Promise.all([
      runCli(binary, ["doctor", "-h"]),
      runCli(binary, ["doctor", "--help"]),
      runCli(binary, ["doctor", "--hlep"]),
    ]);
    expect(short).toEqual(long);
    expect(long.stdout).toContain("Exit codes: 0 no FAIL, 1 a FAIL, 2 usage error.\n");
    expect({ exitCode: unknown.exitCode, first: unknown.stderr.split("\n")[0] }).toEqual({ exitCode: 2, first: "lora-worker: unknown option --hlep" });
  });
});
