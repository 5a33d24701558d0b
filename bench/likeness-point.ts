// Issue 47 item 3: what scoring one preview point costs, against the time the run takes to reach the next point.
// A point of a `samples: 1` run is two images (the trigger's and the class's portrait), of `samples: 4` eight; each
// is scored in the face model's own process (load, then HOG detection and one-jitter embedding per image), as the
// worker scores them. The baseline is the run's own interval between points: a fast run's 100 steps at the
// tier table's ~1.5 s a step on the 24 GB card (src/tiers.ts). Photos: the face_recognition 1.3.0 sdist's.
import { join } from "node:path";
import { FACES, testScorer } from "../test/support/face-scorer.ts";
import { TIERS } from "../src/tiers.ts";
import { sampleEvery } from "../src/recipe/samples.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { median, ms, ratio } from "./lib/stats.ts";

const ROUNDS = 3;
const SECONDS_PER_STEP = 1.5;
const PHOTOS = ["obama2.jpg", "biden.jpg"].map((name) => join(FACES, name));

async function pointMs(images: number): Promise<number> {
  const { embedder } = testScorer();
  const paths = Array.from({ length: images }, (_, i) => PHOTOS[i % PHOTOS.length]!);
  const times: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const started = performance.now();
    const scored = await embedder.embed(paths);
    if (!scored.ok || scored.value.length !== images) throw new Error(`the scorer failed: ${JSON.stringify(scored)}`);
    times.push(performance.now() - started);
  }
  return median(times);
}

async function measure(): Promise<Row[]> {
  const interval = sampleEvery(TIERS.fast.maxTrainSteps) * SECONDS_PER_STEP * 1000;
  const bench = "47.3 likeness point";
  const rows: Row[] = [];
  for (const [samples, images] of [[1, 2], [4, 8]] as const) {
    const cost = await pointMs(images);
    console.log(`samples: ${samples}: ${images} images scored in ${ms(cost)} (median of ${ROUNDS})`);
    rows.push({
      bench, metric: `one point, samples: ${samples} (${images} images, model load included)`, figure: ms(cost),
      baseline: `${ms(interval)}: 100 steps at 1.5 s (tier table, not measured here)`, ratio: ratio(cost / interval),
      target: "< 1: scored before the next point", verdict: verdict(cost / interval, "<", 1),
    });
  }
  return rows;
}

if (import.meta.main) await runBench("47.3 scoring a preview point against the run's own pace", measure);
