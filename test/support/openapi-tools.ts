import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import openapiTS, { astToString } from "openapi-typescript";
import { REPO } from "./host-tree.ts";

// The tools a client developer runs, from the locked devDependencies, under this Bun (no Node.js needed).
const REDOCLY = join(REPO, "node_modules/@redocly/cli/bin/cli.js");
const TSC = join(REPO, "node_modules/typescript/bin/tsc");
const QUIET = { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true", NO_COLOR: "1" };

export function scratchDir(): { dir: string } & Disposable {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-openapi-"));
  // The compiled call imports openapi-fetch the way a client project would: from its node_modules.
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"));
  return { dir, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

export async function run(argv: string[], cwd: string): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn(argv, { cwd, env: QUIET, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

// `redocly lint` with the repository's redocly.yaml (recommended rules, two off: docs/api.md says why).
export async function lint(doc: unknown, dir: string): Promise<{ exitCode: number; problems: string[] }> {
  const file = join(dir, "openapi.json");
  writeFileSync(file, JSON.stringify(doc, null, 2));
  const { exitCode, stdout } = await run([process.execPath, REDOCLY, "lint", file, "--config", join(REPO, "redocly.yaml"), "--format=json"], dir);
  const report = JSON.parse(stdout) as { problems: Array<{ ruleId: string; severity: string; location: Array<{ pointer: string }> }> };
  return { exitCode, problems: report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer}`) };
}

/** openapi-typescript's types for the document, written to `<dir>/<name>.d.ts`. */
export async function generateTypes(doc: unknown, dir: string, name = "api"): Promise<string> {
  const generated = astToString(await openapiTS(doc as Parameters<typeof openapiTS>[0]));
  writeFileSync(join(dir, `${name}.d.ts`), generated);
  return generated;
}

export async function compile(dir: string, ...files: string[]): Promise<{ exitCode: number; output: string }> {
  const options = { strict: true, noEmit: true, target: "es2022", module: "esnext", moduleResolution: "bundler", lib: ["es2022", "dom"], types: [], skipLibCheck: true };
  writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: options, files }));
  const { exitCode, stdout, stderr } = await run([process.execPath, TSC, "-p", dir], dir);
  return { exitCode, output: stdout + stderr };
}
