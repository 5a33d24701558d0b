import { describe, expect, test } from "bun:test";
import { ensureBinary } from "../support/binary.ts";

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
