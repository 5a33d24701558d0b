import { describe, expect, test } from "bun:test";
import { ensureBinary } from "../support/binary.ts";
import { runCli } from "../support/cli-process.ts";

const binary = ensureBinary();

// Every command the top-level help lists, as an operator types it, with the usage line its help starts with.
const COMMANDS: Array<[string[], string]> = [
  [["serve"], "serve"], [["plan"], "plan"], [["doctor"], "doctor"], [["tokenizers"], "tokenizers write"],
  [["tokenizers", "write"], "tokenizers write"], [["tokenizers", "import"], "tokenizers write"],
  [["tokenizers", "check"], "tokenizers write"],
  [["trainer"], "trainer bundle"], [["trainer", "bundle"], "trainer bundle"], [["trainer", "install"], "trainer bundle"],
  [["trainer", "check"], "trainer bundle"], [["config"], "config template"], [["config", "template"], "config template"],
  [["openapi"], "openapi"], [["launch"], "launch"],
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
    expect({ exitCode: unknown.exitCode, first: unknown.stderr.split("\n")[0] }).toEqual({ exitCode: 2, first: "lora-worker doctor: unknown option --hlep" });
  });
});

describe("a usage error", () => {
  test("of serve, plan, tokenizers and config is its message, the command's usage line and its own help hint, not the whole help", async () => {
    const cases: Array<[string[], string, string]> = [
      [["serve", "now"], "serve takes no arguments, got now", "lora-worker serve [--config FILE]"],
      [["plan"], "plan takes exactly one REQUEST.json", "lora-worker plan [--config FILE] REQUEST.json"],
      [["plan", "--confg", "x"], "unknown option --confg (did you mean --config?)", "lora-worker plan [--config FILE] REQUEST.json"],
      [["tokenizers", "imprt", "x"], "tokenizers takes `write`, `import PATH` or `check`, got imprt x (did you mean import?)",
        "lora-worker tokenizers write [--config FILE] | lora-worker tokenizers import [--config FILE] PATH | " +
          "lora-worker tokenizers check [--config FILE]"],
      [["config", "templte"], "config takes `template`, got templte (did you mean template?)", "lora-worker config template"],
    ];
    const answers = await Promise.all(cases.map(([words]) => runCli(binary, words, { LORA_WORKER_CONFIG: "/nonexistent/config.toml" })));
    expect(answers).toEqual(cases.map(([words, message, usage]) => ({
      exitCode: 2, stdout: "",
      stderr: `lora-worker ${words[0]}: ${message}\nusage: ${usage}   (lora-worker ${words[0]} --help for more)\n`,
    })));
  });

  test("a client command's mistyped option is named with the option meant", async () => {
    const typo = await runCli(binary, ["status", "--folow"]);
    expect({ exitCode: typo.exitCode, first: typo.stderr.split("\n")[0] }).toEqual({ exitCode: 2, first: "lora-worker status: unknown option --folow (did you mean --follow?)" });
  });

  test("an unknown command is named with the command it most likely meant; contrast: a word like no command gets no guess, and no command at all gets the whole help", async () => {
    const [typo, far, none] = await Promise.all([runCli(binary, ["stauts"]), runCli(binary, ["frobnicate"]), runCli(binary, [])]);
    expect(typo).toEqual({ exitCode: 2, stdout: "", stderr: "lora-worker: unknown command stauts (did you mean status?)\nlora-worker --help lists the commands\n" });
    expect(far).toEqual({ exitCode: 2, stdout: "", stderr: "lora-worker: unknown command frobnicate\nlora-worker --help lists the commands\n" });
    expect(none.exitCode).toBe(2);
    expect(none.stderr).toStartWith("lora-worker: no command given\n\nlora-worker ");
    expect(none.stderr).toContain("\nUsage:\n  lora-worker serve");
  });
});

describe("the helps agree", () => {
  test("every command that follows a job to its end lists 7 for a paused one; pause says why its own is 0; the overview's resume takes a paused job", async () => {
    const [submit, resume, logs, status, pause, overview] = await Promise.all(
      [["submit"], ["resume"], ["logs"], ["status"], ["pause"], []].map((words) => runCli(binary, [...words, "--help"])),
    );
    for (const help of [submit, resume, logs, status]) expect(help!.stdout).toMatch(/7 paused/);
    expect(pause!.stdout).toContain("Exit: 0 paused (the pause did what was asked: 7 is what status and --follow say of a paused job)");
    expect(overview!.stdout).toContain("a new job continuing a paused, failed or cancelled one");
    expect(overview!.stdout).toContain("7 job paused");
  });
});
