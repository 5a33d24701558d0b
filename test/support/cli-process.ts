import { waitFor } from "./wait.ts";

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

const baseEnv = () => ({ PATH: process.env.PATH ?? "/usr/bin:/bin" });

/** Runs a client command of the binary to its end, with a clean environment plus `env`. */
export async function runCli(binary: string, args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const proc = Bun.spawn([binary, ...args], { env: { ...baseEnv(), ...env }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

export interface RunningCli extends AsyncDisposable {
  stdout(): string;
  /** Waits until stdout matches, with a deadline. */
  waitForOutput(pattern: RegExp, what: string): Promise<RegExpExecArray>;
  done(): Promise<CliResult>;
}

/** A client command left running (a `--follow`), whose output can be watched while it runs. */
export function spawnCli(binary: string, args: string[], env: Record<string, string> = {}): RunningCli {
  const proc = Bun.spawn([binary, ...args], { env: { ...baseEnv(), ...env }, stdout: "pipe", stderr: "pipe" });
  let out = "";
  const reading = (async () => {
    for await (const chunk of proc.stdout) out += new TextDecoder().decode(chunk);
  })();
  const stderr = new Response(proc.stderr).text();
  return {
    stdout: () => out,
    waitForOutput: (pattern, what) => waitFor(() => pattern.exec(out), what),
    async done() {
      const [exitCode] = await Promise.all([proc.exited, reading]);
      return { exitCode, stdout: out, stderr: await stderr };
    },
    async [Symbol.asyncDispose]() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
  };
}

/** A URL on which nothing listens: a port the kernel just handed out and that is closed again. */
export function deadUrl(): string {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const url = `http://127.0.0.1:${server.port}`;
  server.stop(true);
  return url;
}
