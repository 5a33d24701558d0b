import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeJsonAtomic } from "../../src/fs.ts";
import { exitPath, launchPath, trainerPath, type LaunchFile } from "../../src/job-dir/job-dir.ts";
import { decodeCuts, logCutsPath } from "../../src/job-dir/log-cut.ts";
import { MAIN } from "../support/host-tree.ts";
import { waitFor, within } from "../support/wait.ts";

const EXIT_DEADLINE_MS = 10_000;

// A job directory with a launch record for a trainer that runs `first` (given the scratch root), then runs until
// `release` appears next to the directory.
function jobDir(first = (_root: string) => "true") {
  const root = mkdtempSync(join(tmpdir(), "lora-worker-shim-test-"));
  const dir = join(root, "job");
  mkdirSync(dir);
  const release = join(root, "release");
  const launch: LaunchFile = {
    argv: ["sh", "-c", `${first(root)}; until [ -e '${release}' ]; do sleep 0.02; done`],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    cwd: root,
    log: join(root, "train.log"),
    logMaxBytes: 1 << 20,
  };
  writeJsonAtomic(launchPath(dir), launch);
  const shim = Bun.spawn([process.execPath, MAIN, "shim", dir], { stdout: "ignore", stderr: "pipe" });
  return {
    root,
    dir,
    log: launch.log,
    shim,
    release: () => writeJsonAtomic(release, {}),
    [Symbol.dispose]() {
      shim.kill("SIGKILL");
      rmSync(root, { recursive: true, force: true });
    },
  };
}

describe("the shim", () => {
  test("records the trainer's end in exit.json and exits 0", async () => {
    using job = jobDir();
    await waitFor(() => existsSync(trainerPath(job.dir)), "the trainer to start");
    job.release();
    expect(await within(job.shim.exited, EXIT_DEADLINE_MS)).toBe(0);
    expect(JSON.parse(readFileSync(exitPath(job.dir), "utf8"))).toMatchObject({ exit_code: 0, signal: null });
  });

  test("whose job directory was removed under it ends with its trainer and says why, instead of retrying forever", async () => {
    using job = jobDir();
    await waitFor(() => existsSync(trainerPath(job.dir)), "the trainer to start");
    rmSync(job.dir, { recursive: true });
    job.release();
    expect(await within(job.shim.exited, EXIT_DEADLINE_MS)).toBe(1);
    expect(await new Response(job.shim.stderr).text()).toBe(
      `lora-worker shim: ${job.dir} is gone, so exit.json cannot be written\n`,
    );
  });

  test("records the log's generation before the trainer writes, and a new one with each cut to the cap", async () => {
    const flood = (root: string) => `until [ -e '${root}/go' ]; do sleep 0.02; done; head -c 1500000 /dev/zero | tr '\\0' x`;
    using job = jobDir(flood);
    const generation = () => decodeCuts(readFileSync(logCutsPath(job.log), "utf8"))?.generation;
    await waitFor(() => existsSync(trainerPath(job.dir)), "the trainer to start");
    expect({ generation: generation(), bytes: statSync(job.log).size }).toEqual({ generation: "0", bytes: 0 });
    writeJsonAtomic(join(job.root, "go"), {});
    await waitFor(() => generation() !== "0", "the shim to cut the log");
    expect(decodeCuts(readFileSync(logCutsPath(job.log), "utf8"))).toMatchObject({ previous: "0", cutting: false, head: 1 << 18, tailFrom: 1_500_000 - (1 << 18) });
    expect(statSync(job.log).size).toBeLessThan(1 << 20);
    job.release();
    expect(await within(job.shim.exited, EXIT_DEADLINE_MS)).toBe(0);
  });
});
