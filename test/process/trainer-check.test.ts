import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DoctorCheck, DoctorDeps } from "../../src/doctor/doctor.ts";
import { checkPackages, checkSdScriptsArgv } from "../../src/doctor/sd-scripts-checks.ts";
import { createRunAs, resolveServiceAccount } from "../../src/doctor/service-account.ts";
import { checkTrainerPython } from "../../src/doctor/trainer-checks.ts";
import { PYTHON_LOCK } from "../../src/trainer/lock.ts";
import { fakeNvidiaSmi } from "../support/fake-nvidia-smi.ts";
import { CUDA_REPORT, HEALTHY, TORCH_REPORT, BITSANDBYTES_REPORT, writeFakePython } from "../support/fake-python.ts";
import { likenessTable, SCORER_TEST_MS } from "../support/face-scorer.ts";
import { MAIN } from "../support/host-tree.ts";
import { writeStandInSdScripts, writeStandInVenv } from "../support/stand-in-sd-scripts.ts";
import { trainerDoctor } from "../../src/doctor/trainer-doctor.ts";

const TIMEOUT_MS = 60_000;

interface Env extends Disposable {
  dir: string;
  deps: DoctorDeps;
}

// A trainer environment in a temp dir: a venv whose python is the system's python3 (its packages answered as
// `packages`), a stand-in sd-scripts tree written as `standIn` says, nvidia-smi the fake's `scenario`.
function makeEnv(
  { standIn = {}, packages, scenario }:
    { standIn?: Parameters<typeof writeStandInSdScripts>[1]; packages?: Record<string, string>; scenario?: string } = {},
): Env {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-trainer-check-"));
  const { accelerate } = writeStandInVenv(join(dir, "venv/bin"), packages);
  writeStandInSdScripts(join(dir, "sd-scripts"), standIn);
  const config = ConfigSchema.parse({
    state_dir: join(dir, "state"),
    handoff_root: join(dir, "handoff"),
    model_roots: [join(dir, "models")],
    trainer: { mode: "real", accelerate, sd_scripts_dir: join(dir, "sd-scripts") },
    gpu: { nvidia_smi: fakeNvidiaSmi(dir, scenario).path },
  });
  const group = Bun.spawnSync(["id", "-gn"]).stdout.toString().trim();
  const account = resolveServiceAccount(userInfo().username, group);
  const deps: DoctorDeps = { config, trainer: trainerDoctor(config), account, runAs: createRunAs(account), devDir: join(dir, "dev") };
  return { dir, deps, [Symbol.dispose]: () => rmSync(dir, { recursive: true, force: true }) };
}

const line = ({ status, name, detail }: DoctorCheck) => `${status} ${name}: ${detail}`;

describe("trainer check: sd-scripts' own parser and schema on every launch the worker would make", () => {
  test("a parser with every flag the recipe uses takes all 48 launches (4 tiers, samples on and off, fresh and resumed, three caption contexts)", async () => {
    using env = makeEnv();
    const check = await checkSdScriptsArgv(env.deps);
    expect(line(check)).toContain("OK sd-scripts argv: ");
    expect(check.detail).toContain("takes the worker's 48 launches (fast, balanced, quality, smoke;");
  }, TIMEOUT_MS);

  test("a parser without --metadata_trigger_phrase is a FAIL naming the flag and every tier (the contrast)", async () => {
    using env = makeEnv({ standIn: { without: "metadata_trigger_phrase" } });
    const check = await checkSdScriptsArgv(env.deps);
    expect(check.status).toBe("FAIL");
    expect(check.detail).toContain("its parser has no --metadata_trigger_phrase (every launch: fast, balanced, quality, smoke)");
  }, TIMEOUT_MS);

  test("a flag only a resume passes, or only samples, is named with those launches alone", async () => {
    using resumeless = makeEnv({ standIn: { without: "skip_until_initial_step" } });
    expect((await checkSdScriptsArgv(resumeless.deps)).detail)
      .toContain("its parser has no --skip_until_initial_step (fast, balanced, quality, smoke resumed)");
    using sampleless = makeEnv({ standIn: { without: "sample_sampler" } });
    expect((await checkSdScriptsArgv(sampleless.deps)).detail)
      .toContain("its parser has no --sample_sampler (fast, balanced, quality, smoke with samples)");
  }, TIMEOUT_MS);

  test("arguments sd-scripts' own checks refuse are a FAIL quoting them", async () => {
    using env = makeEnv({ standIn: { refusesArguments: "adaptive_noise_scale requires noise_offset" } });
    const check = await checkSdScriptsArgv(env.deps);
    expect(check.status).toBe("FAIL");
    expect(check.detail).toContain("it refuses the arguments: ValueError: adaptive_noise_scale requires noise_offset (every launch");
  }, TIMEOUT_MS);

  test("a dataset schema that refuses a key the worker writes is a FAIL quoting the schema", async () => {
    using env = makeEnv({ standIn: { refusesKey: "max_bucket_reso" } });
    const check = await checkSdScriptsArgv(env.deps);
    expect(check.status).toBe("FAIL");
    expect(check.detail).toContain(
      "its config schema refuses the dataset TOML: ValueError: extra keys not allowed @ data['datasets'][0]['max_bucket_reso'] (every launch",
    );
  }, TIMEOUT_MS);

  test("an sd-scripts that cannot be imported is a FAIL with the exception, not a pass", async () => {
    using env = makeEnv({ standIn: { importError: "No module named 'voluptuous'" } });
    const check = await checkSdScriptsArgv(env.deps);
    expect(check.status).toBe("FAIL");
    expect(check.detail).toContain("cannot import sdxl_train_network from");
    expect(check.detail).toContain("ModuleNotFoundError: No module named 'voluptuous'");
    expect(check.fix).toContain("lora-worker trainer bundle");
  }, TIMEOUT_MS);
});

describe("trainer check: the venv's packages against the lock", () => {
  test("a venv holding the lock exactly is OK", async () => {
    using env = makeEnv();
    expect(line(await checkPackages(env.deps))).toContain(`OK python packages: ${env.deps.config.trainer.accelerate.replace("accelerate", "python")} holds the lock (${PYTHON_LOCK.length} packages`);
  });

  test("another torch and a missing bitsandbytes are a WARN naming both (the contrast)", async () => {
    const packages = Object.fromEntries(PYTHON_LOCK.map((pin) => [pin.name, pin.version]));
    packages["torch"] = "2.5.1+cu124";
    delete packages["bitsandbytes"];
    using env = makeEnv({ packages });
    const check = await checkPackages(env.deps);
    expect(check.status).toBe("WARN");
    expect(check.detail).toContain(`2 of the lock (${PYTHON_LOCK.length} packages`);
    expect(check.detail).toContain("bitsandbytes missing (lock 0.50.2)");
    expect(check.detail).toContain("torch 2.5.1+cu124 (lock 2.14.1)");
  });
});

describe("trainer check: torch sees the GPUs nvidia-smi lists", () => {
  const cpuTorch = [TORCH_REPORT, { ...CUDA_REPORT, available: false, cuda: null, devices: [] }, BITSANDBYTES_REPORT];

  test("torch that sees none while nvidia-smi lists two is a FAIL naming both cards, the driver and torch's CUDA", async () => {
    using env = makeEnv();
    writeFakePython(join(env.dir, "venv/bin/python"), { reports: cpuTorch });
    const cuda = (await checkTrainerPython(env.deps))[1]!;
    expect(line(cuda)).toBe(
      "FAIL cuda: torch sees none of the 2 GPU(s) nvidia-smi lists (0 NVIDIA GeForce RTX 3090, 1 NVIDIA RTX A6000); " +
        "no NVIDIA driver loaded (/proc/driver/nvidia/version absent), a torch built without CUDA",
    );
  });

  test("torch that sees both is OK (the contrast), and with no GPU listed the line says it was not checked", async () => {
    using env = makeEnv();
    writeFakePython(join(env.dir, "venv/bin/python"), { reports: HEALTHY });
    expect((await checkTrainerPython(env.deps)).map((c) => c.status)).toEqual(["OK", "OK", "OK"]);
    using bare = makeEnv({ scenario: "no-driver" });
    writeFakePython(join(bare.dir, "venv/bin/python"), { reports: cpuTorch });
    const cuda = (await checkTrainerPython(bare.deps))[1]!;
    expect(cuda.status).toBe("WARN");
    expect(cuda.detail).toStartWith("not checked: nvidia-smi lists no GPU (");
  });
});

describe("lora-worker trainer check", () => {
  // The command as an operator runs it: the config names the environment, the checks run as the current user.
  async function trainerCheck(env: Env): Promise<{ code: number; lines: string[] }> {
    const config = join(env.dir, "config.toml");
    const { trainer, gpu } = env.deps.config;
    await Bun.write(config, [
      `state_dir = "${env.deps.config.state_dir}"`, `handoff_root = "${env.deps.config.handoff_root}"`,
      `model_roots = ${JSON.stringify(env.deps.config.model_roots)}`,
      `[trainer]\nmode = "real"\naccelerate = "${trainer.accelerate}"\nsd_scripts_dir = "${trainer.sd_scripts_dir}"`,
      `[gpu]\nnvidia_smi = "${gpu.nvidia_smi}"`,
      // The stand-in venv has no dlib: the face scorer's Python is the tests' venv.
      likenessTable(),
    ].join("\n"));
    writeFakePython(join(env.dir, "venv/bin/python"), { reports: HEALTHY });
    for (const dir of [env.deps.config.handoff_root, ...env.deps.config.model_roots]) mkdirSync(dir, { recursive: true });
    const user = env.deps.account;
    const proc = Bun.spawn([process.execPath, MAIN, "trainer", "check", "--config", config, "--user", user.user, "--group", user.group], {
      stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    const [code, out] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
    return { code, lines: out.trimEnd().split("\n") };
  }

  test("on a whole environment prints the config line and the trainer's eight checks, all OK, and exits 0", async () => {
    using env = makeEnv();
    const { code, lines } = await trainerCheck(env);
    expect(lines.map((l) => l.split(":")[0])).toEqual([
      "OK   config", "OK   accelerate", "OK   torch", "OK   cuda", "OK   bitsandbytes", "OK   sd-scripts",
      "OK   sd-scripts argv", "OK   python packages", "OK   likeness", "trainer check",
    ]);
    expect(lines.at(-1)).toBe("trainer check: 0 FAIL, 0 WARN, 9 OK");
    expect(code).toBe(0);
  }, SCORER_TEST_MS);

  test("on one whose sd-scripts lacks a flag, the FAIL line names it and the exit code is 1 (the contrast)", async () => {
    using env = makeEnv({ standIn: { without: "max_token_length" } });
    const { code, lines } = await trainerCheck(env);
    expect(lines.filter((l) => l.startsWith("FAIL"))).toEqual([
      expect.stringContaining("FAIL sd-scripts argv: sd-scripts at ") as unknown as string,
    ]);
    expect(lines.find((l) => l.startsWith("FAIL"))).toContain("its parser has no --max_token_length (fast, balanced, quality, smoke with --max_token_length)");
    expect(code).toBe(1);
  }, SCORER_TEST_MS);
});
