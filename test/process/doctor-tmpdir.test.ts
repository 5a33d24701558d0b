import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DoctorDeps } from "../../src/doctor/doctor.ts";
import { createRunAs, resolveServiceAccount } from "../../src/doctor/service-account.ts";
import { checkTrainerTmpdir } from "../../src/doctor/tmpdir-check.ts";
import { writeExecutable } from "../support/scratch-files.ts";
import { trainerDoctor } from "../../src/doctor/trainer-doctor.ts";

const TIMEOUT_MS = 30_000;
const PYTHON3 = Bun.which("python3", { PATH: "/usr/local/bin:/usr/bin:/bin" })!;

interface Venv extends Disposable {
  python: string;
  state: string;
  deps: DoctorDeps;
}

// A venv beside the configured accelerate, with a state dir far past the 29 characters a plain TMPDIR could afford,
// checked as the current user.
function makeVenv(): Venv {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-doctor-tmpdir-"));
  const state = join(dir, "a-state-dir-whose-path-is-long".repeat(4));
  for (const path of [join(dir, "venv/bin"), state]) mkdirSync(path, { recursive: true });
  const config = ConfigSchema.parse({
    state_dir: state,
    handoff_root: join(dir, "handoff"),
    model_roots: [join(dir, "models")],
    trainer: { mode: "real", accelerate: join(dir, "venv/bin/accelerate") },
  });
  const group = Bun.spawnSync(["id", "-gn"]).stdout.toString().trim();
  const account = resolveServiceAccount(userInfo().username, group);
  const deps: DoctorDeps = { config, trainer: trainerDoctor(config), account, runAs: createRunAs(account), devDir: join(dir, "dev") };
  return { python: join(dir, "venv/bin/python"), state, deps, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

// The links in /dev/shm that lead into `dir`: other files' workers make and remove their own there meanwhile
// (bun test --parallel), so only this test's own are counted.
const shmLinksInto = (dir: string) => readdirSync("/dev/shm").filter((name) => {
  if (!name.startsWith("lora-worker-")) return false;
  try {
    return readlinkSync(join("/dev/shm", name)).startsWith(`${dir}/`);
  } catch {
    return false; // removed since it was listed, or not a link
  }
});

describe("doctor's check of the trainer's TMPDIR", () => {
  test("the venv's Python binds multiprocessing's sockets under a job's link with a long state dir, and nothing is left", async () => {
    using venv = makeVenv();
    writeExecutable(venv.python, `#!/bin/sh\nexec ${PYTHON3} "$@"\n`);
    const check = await checkTrainerTmpdir(venv.deps, { sockets: true });
    expect(check).toEqual({
      status: "OK",
      name: "trainer tmpdir",
      detail: "each job's TMPDIR is /dev/shm/lora-worker-<job id>, a link to its folder in the state dir (89 of 107 bytes " +
        `with Python's socket names); ${venv.python} as ${venv.deps.account.user} binds its sockets there`,
    });
    expect(readdirSync(venv.state)).toEqual([]);
    expect(shmLinksInto(venv.state)).toEqual([]);
  }, TIMEOUT_MS);

  test("without the trainer's Python (no environment yet) the sockets are not tried: a WARN that points at accelerate's line, not a second FAIL", async () => {
    using venv = makeVenv();
    const check = await checkTrainerTmpdir(venv.deps, { sockets: true });
    expect(check).toMatchObject({ status: "WARN", name: "trainer tmpdir" });
    expect(check.detail).toEndWith(`; sockets not tried: ${venv.deps.account.user} cannot run ${venv.python} (see accelerate)`);
  }, TIMEOUT_MS);

  test("a Python that takes the link's target instead (the old TMPDIR) fails with the kernel's words", async () => {
    using venv = makeVenv();
    writeExecutable(venv.python, `#!/bin/sh\nTMPDIR=$(readlink "$TMPDIR") exec ${PYTHON3} "$@"\n`);
    const check = await checkTrainerTmpdir(venv.deps, { sockets: true });
    expect(check).toMatchObject({ status: "FAIL", name: "trainer tmpdir" });
    expect(check.detail).toStartWith(`${venv.python} as ${venv.deps.account.user} could not bind multiprocessing's sockets under such a TMPDIR: exit 1, OSError: AF_UNIX path too long`);
    expect(readdirSync(venv.state)).toEqual([]);
  }, TIMEOUT_MS);
});
