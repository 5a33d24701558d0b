// A short-lived child run to its end, for the commands that drive other programs (tar, pip, python).

/** A child's exit and its output (stdout and stderr together). */
export async function run(
  argv: string[],
  env?: Record<string, string | undefined>,
): Promise<{ code: number; output: string }> {
  let child;
  try {
    child = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe", stdin: "ignore", ...(env ? { env } : {}) });
  } catch (err) {
    return { code: 127, output: `${argv[0]} cannot be started: ${(err as Error).message}` };
  }
  const [out, err] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text()]);
  return { code: await child.exited, output: `${out}${err}` };
}

export function lastLines(output: string, count = 3): string {
  return output.split("\n").map((l) => l.trim()).filter((l) => l !== "").slice(-count).join(" | ") || "no output";
}
