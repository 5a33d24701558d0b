import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DoctorCheck, DoctorDeps } from "../../src/doctor/doctor.ts";
import { createRunAs, resolveServiceAccount } from "../../src/doctor/service-account.ts";
import { checkTrainerPython } from "../../src/doctor/trainer-checks.ts";
import { liveGroupMembers } from "../../src/os/terminate.ts";
import { TORCH_REPORT, writeFakePython, writeHangingPython } from "../support/fake-python.ts";
import { writeExecutable } from "../support/scratch-files.ts";
import { waitFor } from "../support/wait.ts";
import { trainerDoctor } from "../../src/doctor/trainer-doctor.ts";

// Short enough that a hang costs the suite a second, long enough for a shell script on a busy machine.
const DEADLINE_MS = 1000;
const TIMEOUT_MS = 30_000;
const PYTHON3 = Bun.which("python3");

interface Venv extends Disposable {
  dir: string;
  python: string;
  deps: DoctorDeps;
}

// A venv beside the configured accelerate, checked as the current user (doctor's own account).
function makeVenv(): Venv {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-doctor-python-"));
  mkdirSync(join(dir, "venv/bin"), { recursive: true });
  mkdirSync(join(dir, "state"));
  const config = ConfigSchema.parse({
    state_dir: join(dir, "state"),
    handoff_root: join(dir, "handoff"),
    model_roots: [join(dir, "models")],
    trainer: { mode: "real", accelerate: join(dir, "venv/bin/accelerate") },
  });
  const group = Bun.spawnSync(["id", "-gn"]).stdout.toString().trim();
  const account = resolveServiceAccount(userInfo().username, group);
  const deps: DoctorDeps = { config, trainer: trainerDoctor(config), account, runAs: createRunAs(account), devDir: join(dir, "dev"), pythonDeadlineMs: DEADLINE_MS };
  return { dir, python: join(dir, "venv/bin/python"), deps, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

const lines = (checks: DoctorCheck[]) => checks.map(({ status, name, detail }) => `${status} ${name}: ${detail}`);

describe("doctor's check of the trainer's Python", () => {
  test("a python that hangs after importing torch is killed with its whole group at the deadline, and the stage it hung in fails", async () => {
    using venv = makeVenv();
    const pidFile = join(venv.dir, "python.pid");
    writeHangingPython(venv.python, pidFile, [TORCH_REPORT]);
    const started = performance.now();
    const checks = await checkTrainerPython(venv.deps);
    const tookMs = performance.now() - started;
    expect(lines(checks)).toEqual([
      `OK torch: torch 2.5.1+cu124 imports in ${venv.python} as ${venv.deps.account.user}`,
      `FAIL cuda: ${venv.python} as ${venv.deps.account.user} did not answer torch.cuda.is_available(): no answer within 1 s; killed at the deadline`,
      `WARN bitsandbytes: not checked: ${venv.python} as ${venv.deps.account.user} stopped before it, at cuda`,
    ]);
    // The child holding the pipes open must not hold the check past the deadline (its sleep is 600 s).
    expect(tookMs).toBeLessThan(DEADLINE_MS + 5000);
    const group = Number(readFileSync(pidFile, "utf8"));
    await waitFor(() => liveGroupMembers(group).length === 0, "the hung python's process group to be gone");
  }, TIMEOUT_MS);

  test("a python that answers within the same deadline passes every stage, naming the devices torch sees", async () => {
    using venv = makeVenv();
    writeFakePython(venv.python);
    expect(lines(await checkTrainerPython(venv.deps))).toEqual([
      `OK torch: torch 2.5.1+cu124 imports in ${venv.python} as ${venv.deps.account.user}`,
      "OK cuda: torch sees 2 CUDA device(s): 0 NVIDIA GeForce RTX 3090, 1 NVIDIA RTX A6000 (torch built for CUDA 12.4)",
      "OK bitsandbytes: bitsandbytes 0.45.0 imports; AdamW8bit stepped on cuda:0",
    ]);
  }, TIMEOUT_MS);

  test("a python that is not there fails torch with the reason and leaves the later stages unchecked", async () => {
    using venv = makeVenv();
    const [torch, ...rest] = await checkTrainerPython(venv.deps);
    expect(torch).toMatchObject({ status: "FAIL", name: "torch" });
    expect(torch!.detail).toStartWith(`${venv.python} as ${venv.deps.account.user} did not import torch: exit 127, `);
    expect(rest.map(({ status, name }) => `${status} ${name}`)).toEqual(["WARN cuda", "WARN bitsandbytes"]);
  }, TIMEOUT_MS);
});

// The real interpreter runs doctor's probe program against stand-in packages: the program itself, and
// Python's own ImportError text, are what is tested.
describe.skipIf(PYTHON3 === null)("doctor's probe program under a real Python", () => {
  function venvWithStubTorch(withBitsandbytes: boolean): Venv {
    const venv = makeVenv();
    const site = join(venv.dir, "site");
    mkdirSync(join(site, "torch"), { recursive: true });
    // What the probe's AdamW8bit step asks of torch: a weight and its gradient, as plain objects here.
    const weights = "class _Weight:\n    grad = None\ndef zeros(n, device=None):\n    return _Weight()\n" +
      "def ones_like(weight):\n    return _Weight()\nclass nn:\n    Parameter = staticmethod(lambda weight: weight)\n";
    writeFileSync(join(site, "torch/__init__.py"), `__version__ = "2.5.1+cu124"\nfrom . import cuda, version\n${weights}`);
    writeFileSync(join(site, "torch/version.py"), 'cuda = "12.4"\n');
    writeFileSync(
      join(site, "torch/cuda.py"),
      '_names = ["NVIDIA GeForce RTX 3090", "NVIDIA RTX A6000"]\ndef is_available():\n    return True\ndef device_count():\n    return len(_names)\ndef get_device_name(i):\n    return _names[i]\n',
    );
    if (withBitsandbytes) {
      mkdirSync(join(site, "bitsandbytes"));
      const optimizer = "class optim:\n    class AdamW8bit:\n        def __init__(self, params, lr):\n            pass\n" +
        "        def step(self):\n            pass\n";
      writeFileSync(join(site, "bitsandbytes/__init__.py"), `__version__ = "0.45.0"\n${optimizer}`);
    }
    writeExecutable(venv.python, `#!/bin/sh\nPYTHONPATH='${site}' exec '${PYTHON3}' "$@"\n`);
    return venv;
  }

  test("without bitsandbytes in the venv, bitsandbytes fails with Python's own ModuleNotFoundError, after torch and CUDA passed", async () => {
    using venv = venvWithStubTorch(false);
    expect(lines(await checkTrainerPython(venv.deps))).toEqual([
      `OK torch: torch 2.5.1+cu124 imports in ${venv.python} as ${venv.deps.account.user}`,
      "OK cuda: torch sees 2 CUDA device(s): 0 NVIDIA GeForce RTX 3090, 1 NVIDIA RTX A6000 (torch built for CUDA 12.4)",
      `FAIL bitsandbytes: ${venv.python} as ${venv.deps.account.user} did not import bitsandbytes and take a step of AdamW8bit (the recipe's optimizer): exit 1, ModuleNotFoundError: No module named 'bitsandbytes'`,
    ]);
  }, TIMEOUT_MS);

  test("with bitsandbytes in the venv, the same probe passes every stage", async () => {
    using venv = venvWithStubTorch(true);
    expect((await checkTrainerPython(venv.deps)).map(({ status }) => status)).toEqual(["OK", "OK", "OK"]);
  }, TIMEOUT_MS);
});
