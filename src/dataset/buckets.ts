// Which aspect bucket sd-scripts trains an image in, and at what scale (library/train_util.py,
// BucketManager.select_bucket with upscaling allowed, over model_util.make_bucket_resolutions): the buckets are every
// width from the smallest side up to the largest in steps, each with the tallest height that keeps the area within
// the tier's resolution squared, both ways round, and the square; the image goes to the bucket whose aspect ratio is
// nearest its own (the first in sorted order on a tie) and is scaled so that it covers the bucket. A scale above 1
// is an upscale: the LoRA learns the blur.

/** How the dataset's buckets are laid out (the dataset TOML's keys, sd-scripts' defaults where it sets none). */
export interface BucketLayout {
  /** The tier's resolution: the buckets' area is at most its square. */
  resolution: number;
  minBucketReso: number;
  maxBucketReso: number;
  bucketResoSteps: number;
}

/** The bucket an image of this size is trained in, and the scale that takes it there. */
export interface BucketFit {
  bucket: [width: number, height: number];
  scale: number;
}

/** The buckets, sorted as sd-scripts sorts them: by width, then height. */
export function bucketResolutions(layout: BucketLayout): Array<[number, number]> {
  const { resolution, minBucketReso: min, maxBucketReso: max, bucketResoSteps: step } = layout;
  const area = resolution * resolution;
  const found = new Map<string, [number, number]>();
  const add = (w: number, h: number) => found.set(`${w}x${h}`, [w, h]);
  const square = Math.floor(Math.sqrt(area) / step) * step;
  add(square, square);
  for (let width = min; width <= max; width += step) {
    const height = Math.min(max, Math.floor(Math.floor(area / width) / step) * step);
    if (height < min) continue;
    add(width, height);
    add(height, width);
  }
  return [...found.values()].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
}

/** Where sd-scripts puts an image of `width` x `height` (as Pillow reads it) and how much it scales it. */
export function fitBucket(width: number, height: number, layout: BucketLayout): BucketFit {
  const buckets = bucketResolutions(layout);
  const aspect = width / height;
  const exact = buckets.find(([w, h]) => w === width && h === height);
  let bucket = exact ?? buckets[0]!;
  if (exact === undefined) {
    let best = Infinity;
    for (const candidate of buckets) {
      const error = Math.abs(candidate[0] / candidate[1] - aspect);
      if (error < best) [best, bucket] = [error, candidate];
    }
  }
  const scale = aspect > bucket[0] / bucket[1] ? bucket[1] / height : bucket[0] / width;
  return { bucket, scale };
}
