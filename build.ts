// Compiles the worker into one self-contained executable, dist/lora-worker, with its version baked in.
import { statSync } from "node:fs";
import pkg from "./package.json" with { type: "json" };

const OUTFILE = "dist/lora-worker";

function gitCommit(): string {
  const res = Bun.spawnSync(["git", "rev-parse", "--short=12", "HEAD"], { stderr: "ignore" });
  if (res.exitCode !== 0) return "unknown";
  const dirty = Bun.spawnSync(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.toString().trim() !== "";
  return `${res.stdout.toString().trim()}${dirty ? "-dirty" : ""}`;
}

const build = { version: pkg.version, commit: gitCommit() };
const result = await Bun.build({
  entrypoints: ["src/main.ts"],
  compile: { outfile: OUTFILE, autoloadDotenv: false, autoloadBunfig: false, autoloadTsconfig: false, autoloadPackageJson: false },
  define: { LORA_WORKER_BUILD: JSON.stringify(build) },
  minify: true,
  sourcemap: "linked",
});
if (!result.success) {
  for (const message of result.logs) console.error(message);
  process.exit(1);
}
const mib = (statSync(OUTFILE).size / 1024 / 1024).toFixed(1);
console.log(`built ${OUTFILE}: lora-worker ${build.version} (commit ${build.commit}), ${mib} MiB`);
