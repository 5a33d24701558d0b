import { describe, expect, test } from "bun:test";
import { bucketResolutions, fitBucket } from "../../src/dataset/buckets.ts";

// The dataset TOML's layout at each tier resolution (recipe/dataset-toml.ts): max_bucket_reso 2048, sd-scripts'
// min_bucket_reso 256 and bucket_reso_steps 64.
const layout = (resolution: number) => ({ resolution, minBucketReso: 256, maxBucketReso: 2048, bucketResoSteps: 64 });

// Each row as sd-scripts' BucketManager.select_bucket picks it (checked against its code, run in Python, for these
// sizes): width, height, tier resolution, the bucket, the scale.
const TABLE: Array<[number, number, number, [number, number], number]> = [
  [640, 896, 768, [640, 896], 1],
  [832, 1248, 1024, [832, 1216], 1],
  [1024, 1024, 1024, [1024, 1024], 1],
  [3000, 4000, 1024, [896, 1152], 0.2986666666666667],
  [2000, 300, 768, [1856, 256], 0.928],
  [512, 512, 768, [768, 768], 1.5],
  [600, 800, 768, [640, 896], 1.12],
  [700, 700, 768, [768, 768], 1.0971428571428572],
  [4, 6, 768, [640, 896], 160],
];

describe("the bucket sd-scripts trains an image in", () => {
  test.each(TABLE)("%i x %i at %i goes to %p at scale %d", (width, height, resolution, bucket, scale) => {
    expect(fitBucket(width, height, layout(resolution))).toEqual({ bucket, scale });
  });

  test("a photo under the resolution's pixel count is not upscaled when its bucket is no larger than it", () => {
    // Contrast: by pixel count alone (the rule before), both are under the resolution squared.
    expect(640 * 896 < 768 ** 2 && 832 * 1248 < 1024 ** 2).toBe(true);
    expect(fitBucket(640, 896, layout(768)).scale).toBe(1);
    expect(fitBucket(832, 1248, layout(1024)).scale).toBe(1);
  });

  test("the buckets are model_util's: the square, both orientations, sorted, no side past 2048 or under 256", () => {
    const buckets = bucketResolutions(layout(1024));
    expect(buckets).toContainEqual([1024, 1024]);
    expect(buckets).toContainEqual([832, 1216]);
    expect(buckets).toContainEqual([1216, 832]);
    expect(buckets.every(([w, h]) => w * h <= 1024 ** 2 && Math.min(w, h) >= 256 && Math.max(w, h) <= 2048)).toBe(true);
    expect(buckets).toEqual([...buckets].sort((a, b) => a[0] - b[0] || a[1] - b[1]));
  });
});
