import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { inProcessApp } from "../support/app-harness.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { SIMULATOR, simulateModeConfig } from "../support/real-mode.ts";
import { untilEnded } from "../support/jobs.ts";

// A fast run with previews: drawn at four points of the run (the last at its end), each template with the trigger
// and with the class alone; its states every 25 steps (40 without previews), so each point has its LoRA to keep.
const TIMEOUT_MS = 60_000;

describe("the previews of a run", () => {
  test("a fast run with samples: 1 draws the trigger's and the class's portrait at steps 100, 200, 300 and 400", async () => {
    using tree = makeHostTree();
    await using a = inProcessApp(tree, simulateModeConfig(tree, { seconds_per_step: 0 }), SIMULATOR);
    const init = { method: "POST", headers: { "content-type": "application/json" } };
    const { body } = await a.json("/train", { ...init, body: JSON.stringify(tree.validRequest({ samples: 1 })) });
    const final = await untilEnded(a, body.worker_job_id, 15_000);
    expect(final.status).toBe("succeeded");
    const shown = final.samples.map((s: any) => [s.step, s.index, s.template, s.subject, s.prompt.split(",")[0]]);
    expect(shown).toEqual([100, 200, 300, 400].flatMap((step) => [
      [step, 0, "portrait", "trigger", "portrait photo of ohwx person"],
      [step, 1, "portrait", "class", "portrait photo of person"],
    ]));
    // Each is served as the record lists it.
    const image = await a.app.request(final.samples[7].url);
    expect([image.status, image.headers.get("content-type")]).toEqual([200, "image/png"]);
    // The states every 25 steps, the largest divisor of the preview cadence within the tier's 40.
    const argv: string[] = (await Bun.file(join(tree.state, "jobs", final.worker_job_id, "launch.json")).json()).argv;
    expect(argv.filter((f) => /^--(save|sample)_every_n_steps=/.test(f))).toEqual(["--save_every_n_steps=25", "--sample_every_n_steps=100"]);
  }, TIMEOUT_MS);
});
