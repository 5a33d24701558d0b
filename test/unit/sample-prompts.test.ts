import { describe, expect, test } from "bun:test";
import { sampleEvery, samplePrompts, saveEvery } from "../../src/recipe/samples.ts";
import { TIERS } from "../../src/tiers.ts";

const REQUEST = {
  dataset_dir: "/d", base_model_path: "/m", output_dir: "/o", output_name: "x", trigger: "ohwx",
  subject_class: "young woman", repeats: 1, tier: "fast" as const, device_index: 0, seed: 7, samples: 2,
};

describe("the previews a run draws", () => {
  test("each template twice, with the trigger and with the class alone, on the same seed", () => {
    const prompts = samplePrompts(REQUEST) as Array<{ prompt: string; seed: number }>;
    expect(prompts.map((p) => [p.prompt.split(",")[0], p.seed])).toEqual([
      ["portrait photo of ohwx young woman", 7],
      ["portrait photo of young woman", 7],
      ["full body photo of ohwx young woman", 8],
      ["full body photo of young woman", 8],
    ]);
    // Contrast: without samples, no prompts.
    expect(samplePrompts({ ...REQUEST, samples: 0 })).toEqual([]);
  });

  test("at no more than four points of each tier's run, the last at its end, whatever its save cadence", () => {
    const points = Object.entries(TIERS).map(([name, tier]) => {
      const every = sampleEvery(tier.maxTrainSteps);
      return { name, every, points: tier.maxTrainSteps / every };
    });
    expect(points).toEqual([
      { name: "fast", every: 100, points: 4 },
      { name: "balanced", every: 375, points: 4 },
      { name: "quality", every: 750, points: 4 },
      { name: "smoke", every: 2, points: 3 },
    ]);
    // Contrast: the states are saved far more often (fast: every 40 steps, 10 of them).
    expect(TIERS.fast.maxTrainSteps / TIERS.fast.checkpointEvery).toBe(10);
  });

  test("a run with previews saves at each preview point: the largest divisor of their cadence within the tier's", () => {
    const cadence = Object.entries(TIERS).map(([name, tier]) => [name, saveEvery(tier, true), saveEvery(tier, false)]);
    expect(cadence).toEqual([["fast", 25, 40], ["balanced", 125, 150], ["quality", 75, 100], ["smoke", 2, 2]]);
    for (const tier of Object.values(TIERS)) expect(sampleEvery(tier.maxTrainSteps) % saveEvery(tier, true)).toBe(0);
    // Contrast: the tier's own cadence misses the fast run's points at 100 and 300.
    expect(100 % TIERS.fast.checkpointEvery).not.toBe(0);
  });

  test("a run whose length four does not divide is previewed at a divisor of it, so its end is drawn", () => {
    expect([7, 10, 6, 1].map((steps) => [steps, sampleEvery(steps)])).toEqual([[7, 7], [10, 5], [6, 2], [1, 1]]);
  });
});
