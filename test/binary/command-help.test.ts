import { describe, expect, test } from "bun:test";
import { COMMANDS } from "../../src/cli/commands.ts";
import { ensureBinary } from "../support/binary.ts";
import { runCli } from "../support/cli-process.ts";

const binary = ensureBinary();

// Every command of the table, as an operator types it (and each action of one of several forms), with the usage
// line its help starts with: the table's first form.
const COMMAND_WORDS: Array<[string[], string]> = Object.entries(COMMANDS).flatMap(([name, command]) => {
  const actions = command.usage.map((form) => form.split(" ")[1] ?? "").filter((word) => /^[a-z]+$/.test(word));
  return [[name], ...actions.map((action) => [name, action])].map((words): [string[], string] => [words, command.usage[0]!]);
});
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

describe("each command's --help", () => {
  test("prints that command's own usage on stdout and exits 0, without a config, a worker or a state dir", async () => {
    expect(COMMAND_WORDS.length).toBe(25);
    const answers = await Promise.all(COMMAND_WORDS.map(([words]) => runCli(binary, [...words, "--help"], { LORA_WORKER_CONFIG: "/nonexistent/config.toml" })));
    const firstForm = (usage: string) => new RegExp(`^Usage: lora-worker ${escaped(usage).replace(/ /g, "\\s+")}[ \n]`);
    const seen = answers.map((a, i) => ({ command: COMMAND_WORDS[i]![0].join(" "), exitCode: a.exitCode, stderr: a.stderr, usage: firstForm(COMMAND_WORDS[i]![1]).test(a.stdout) }));
    const want = COMMAND_WORDS.map(([words]) => ({ command: words.join(" "), exitCode: 0, stderr: "", usage: true }));
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

  test("every command word of the table is guessed: trainr, opnapi and trainer instal get theirs (the words the old list lacked)", async () => {
    const [trainr, opnapi, instal] = await Promise.all([runCli(binary, ["trainr"]), runCli(binary, ["opnapi"]), runCli(binary, ["trainer", "instal"])]);
    expect(trainr.stderr).toBe("lora-worker: unknown command trainr (did you mean trainer?)\nlora-worker --help lists the commands\n");
    expect(opnapi.stderr).toStartWith("lora-worker: unknown command opnapi (did you mean openapi?)\n");
    expect({ exitCode: instal.exitCode, first: instal.stderr.split("\n")[0] })
      .toEqual({ exitCode: 2, first: "lora-worker trainer: trainer takes `bundle`, `install` or `check`, got instal (did you mean install?)" });
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
  test("the overview lists each form of every command in the table with the synopsis its own help starts with, --other-sd-scripts included", async () => {
    const overview = (await runCli(binary, ["--help"])).stdout.replace(/\s+/g, " ");
    const forms = Object.values(COMMANDS).flatMap((command) => command.usage);
    expect(forms.filter((form) => !overview.includes(`lora-worker ${form}`))).toEqual([]);
    expect(overview).toContain("trainer bundle --sd-scripts DIR --out FILE [--other-sd-scripts]");
  });

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
