import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ConfigSchema, type Config } from "../../src/config/schema.ts";
import { readKnobs } from "../../src/simulator/knobs.ts";
import { describeTrainer } from "../../src/trainer/trainer.ts";
import { TIERS } from "../../src/tiers.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";

const SELF = ["/usr/bin/lora-worker"];
const REPLAY = join(import.meta.dir, "../fixtures/real/sdscripts-accelerate-1.log");

function configFor(tree: HostTree, trainer: Record<string, unknown>, simulate: Record<string, unknown> = {}): Config {
  const roots = { state_dir: tree.state, handoff_root: tree.handoff, model_roots: [tree.models] };
  return ConfigSchema.parse({ ...roots, trainer, simulate });
}

describe("the trainer described once from trainer.mode", () => {
  test("a simulated trainer is this program, in the job's directory, with the knobs the simulator reads", () => {
    using tree = makeHostTree();
    const simulate = { seconds_per_step: 0.02, fail: "nan@5", replay_log: "" };
    const trainer = describeTrainer(configFor(tree, { mode: "simulate" }, simulate), SELF);
    expect(trainer).toMatchObject({ command: SELF, simulated: true });
    expect(trainer.cwd("/state/jobs/abc")).toBe("/state/jobs/abc");
    const knobs = readKnobs(trainer.env);
    expect(knobs.ok && knobs.value.secondsPerStep).toBe(0.02);
    expect(knobs.ok && knobs.value.replay).toBeNull();
    expect(trainer.expectedTotal("fast")).toBe(TIERS.fast.maxTrainSteps);
  });

  test("a replay hands the simulator its log and speed, and the log's own steps decide the total", () => {
    using tree = makeHostTree();
    const config = configFor(tree, { mode: "simulate" }, { replay_log: REPLAY, replay_speed: 4 });
    const trainer = describeTrainer(config, SELF);
    const knobs = readKnobs(trainer.env);
    expect(knobs.ok && knobs.value.replay).toEqual({ logPath: REPLAY, speed: 4 });
    expect(trainer.expectedTotal("fast")).toBeNull();
  });

  test("preview photos reach the simulator as its knobs, and a photo key without the subject's is refused", () => {
    using tree = makeHostTree();
    const photos = { preview_subject: "/p/obama.jpg", preview_other: "/p/biden.jpg", preview_learned_at: 200 };
    const knobs = readKnobs(describeTrainer(configFor(tree, { mode: "simulate" }, photos), SELF).env);
    expect(knobs.ok && knobs.value.previews).toEqual({ subject: "/p/obama.jpg", other: "/p/biden.jpg", learnedAt: 200, bleedAt: 0 });
    const none = readKnobs(describeTrainer(configFor(tree, { mode: "simulate" }), SELF).env);
    expect(none.ok && none.value.previews).toBeNull();
    const stray = () => configFor(tree, { mode: "simulate" }, { preview_bleed_at: 300 });
    expect(stray).toThrow("needs preview_subject");
    expect(() => configFor(tree, { mode: "simulate" }, { preview_subject: "obama.jpg" })).toThrow("must be empty or an absolute path");
  });

  test("contrast: the real trainer is accelerate in sd-scripts' checkout, its environment the recipe's alone", () => {
    using tree = makeHostTree();
    const real = { mode: "real", accelerate: "/opt/venv/bin/accelerate", sd_scripts_dir: tree.root };
    const trainer = describeTrainer(configFor(tree, real, { replay_log: REPLAY }), SELF);
    expect(trainer).toMatchObject({ command: ["/opt/venv/bin/accelerate"], simulated: false, env: {} });
    expect(trainer.cwd("/state/jobs/abc")).toBe(tree.root);
    expect(trainer.expectedTotal("fast")).toBe(TIERS.fast.maxTrainSteps);
  });
});
