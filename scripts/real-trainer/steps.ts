// How the harness runs a step: a command with its output in a log file, and a check line with its duration.
import { openSync, readFileSync } from "node:fs";

export interface CheckLine {
  name: string;
  ok: boolean;
  detail: string;
}

export class CheckFailed extends Error {}

/** Runs `fn` as one named check: "ok   name (12.3 s): detail" or "FAIL name (…): why". */
export function createChecks(print: (line: string) => void) {
  const lines: CheckLine[] = [];
  return {
    lines,
    async check(name: string, fn: () => Promise<string>): Promise<boolean> {
      const started = performance.now();
      let line: CheckLine;
      try {
        line = { name, ok: true, detail: await fn() };
      } catch (err) {
        const why = err instanceof CheckFailed ? err.message : `${(err as Error).stack ?? err}`;
        line = { name, ok: false, detail: why };
      }
      const took = ((performance.now() - started) / 1000).toFixed(1);
      print(`${line.ok ? "ok  " : "FAIL"} ${name} (${took} s): ${line.detail}`);
      lines.push(line);
      return line.ok;
    },
  };
}

export interface Run {
  exitCode: number;
  output: string;
}

/** Runs argv to its end with stdout and stderr into `log` (appended), and answers what it wrote there. */
export async function runLogged(argv: string[], log: string, opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const before = safeRead(log).length;
  const fd = openSync(log, "a");
  const proc = Bun.spawn(argv, { cwd: opts.cwd, env: opts.env ?? process.env, stdout: fd, stderr: fd, stdin: "ignore" });
  const exitCode = await proc.exited;
  return { exitCode, output: safeRead(log).slice(before) };
}

/** Like runLogged, but a non-zero exit fails the check with the last lines it printed. */
export async function mustRun(argv: string[], log: string, opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<string> {
  const run = await runLogged(argv, log, opts);
  if (run.exitCode !== 0) throw new CheckFailed(`${argv.slice(0, 3).join(" ")} … exited ${run.exitCode}: ${tail(run.output)} (log: ${log})`);
  return run.output;
}

export function tail(text: string, lines = 3): string {
  return text.split(/\r?\n|\r/).filter((l) => l.trim() !== "").slice(-lines).join(" / ");
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}
