import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { LineSplitter, MAX_RECORD_CHARS } from "../../src/progress/tracker.ts";
import { applyLine, initialProgress, type Progress } from "../../src/progress/progress.ts";

const FIXTURES = join(import.meta.dir, "../fixtures/real");

function splitAll(chunks: Iterable<string>): string[] {
  const splitter = new LineSplitter();
  const records: string[] = [];
  for (const chunk of chunks) records.push(...splitter.push(chunk));
  return [...records, ...splitter.flush()];
}

function fold(records: string[], start: Progress = initialProgress()): Progress {
  return records.reduce(applyLine, start);
}

// Deterministic chunk sizes so a failure can be replayed.
function* randomSizes(seed: number, max: number): Generator<number> {
  let state = seed >>> 0;
  for (;;) {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    yield 1 + (state % max);
  }
}

function* decodeInChunks(bytes: Uint8Array, seed: number): Generator<string> {
  const decoder = new TextDecoder("utf-8");
  const sizes = randomSizes(seed, 23);
  for (let offset = 0; offset < bytes.byteLength; ) {
    const end = Math.min(bytes.byteLength, offset + sizes.next().value!);
    yield decoder.decode(bytes.subarray(offset, end), { stream: true });
    offset = end;
  }
  yield decoder.decode();
}

// A fold without an expected total takes the first one the log announces as the run's.
function progress(fields: Partial<Progress>): Progress {
  return { ...initialProgress(), expected_total: fields.total_steps ?? null, ...fields };
}

const RICH_NAN_FINAL = progress({
  phase: "training",
  step: 205,
  total_steps: 3280,
  last_loss_nan: true,
  nan_streak: 5,
  eta_s: 1 * 3600 + 1 * 60 + 47,
  seconds_per_step: 1.21,
});

const fixtureFinals: Record<string, Progress> = {
  // Failure output with no steps bar: nothing of it is progress.
  "sdscripts-cuda-error-oom-1.log": progress({}),
  "sdscripts-cublas-alloc-1.log": progress({}),
  "sdscripts-illegal-access-1.log": progress({}),
  "sdscripts-sigkill-1.log": progress({}),
  "sdscripts-sd15-in-sdxl-1.log": progress({}),
  // Real sd-scripts on the CPU, stopped by a missing tokenizer before the model loads.
  "sdscripts-tokenizer-missing-1.log": progress({}),
  // Real sd-scripts on the CPU under the worker: a smoke run paused right after its state at step 2 (stopped by
  // SIGTERM while it went on to step 3), and its resume. A resumed bar counts the steps left from 0 (4/4 of 6), which
  // read as a fresh run is another run's total; folded as the resume it is, below.
  "sdscripts-cpu-smoke-paused-1.log": progress({
    phase: "training", step: 2, total_steps: 6, loss: 1.06, eta_s: 43, seconds_per_step: 10.8, sampling_step: 2,
  }),
  "sdscripts-cpu-smoke-resumed-1.log": progress({
    phase: "done", total_steps: 6, expected_total: 6, contradicting_total: 4, contradicting_n: 4, sampling_step: 6,
  }),
  // Its dataset's only image is "a.Png", which sd-scripts' glob does not see: "No data found.", exit 0.
  "sdscripts-cpu-no-data-1.log": progress({}),
  // Killed by the kernel's OOM killer (a 6 GiB memory cgroup) while it loaded the U-Net.
  "sdscripts-cpu-oom-killed-1.log": progress({}),
  // A fast job paused at its state of step 40 (no preview before step 100), and its resume, cancelled after its
  // state of step 80.
  "sdscripts-cpu-fast-paused-1.log": progress({
    phase: "training", step: 40, total_steps: 400, loss: 1.01, eta_s: 2614, seconds_per_step: 7.26, sampling_step: null,
  }),
  "sdscripts-cpu-fast-resumed-cancelled-1.log": progress({
    phase: "training", total_steps: 400, expected_total: 400, contradicting_total: 360, contradicting_n: 40,
    sampling_step: null,
  }),
  "sdscripts-ignored-exception-1.log": progress({ phase: "done", step: 1500, total_steps: 1500, eta_s: 0, seconds_per_step: 1 / 1.23 }),
  // The same five redraws as sdscripts-epochs-rich-nan-1.log, on one physical line.
  "sdscripts-raw-redraws-1.log": RICH_NAN_FINAL,
  "sdscripts-accelerate-1.log": progress({}),
  "sdscripts-nodata-2.log": progress({}),
  "sdscripts-rich-1.log": progress({ phase: "training" }),
  "sdscripts-traceback-truncated-2.log": progress({ phase: "training", total_steps: 1500 }),
  "sdscripts-oom-2.log": progress({ phase: "training", total_steps: 2300 }),
  "sdscripts-epochs-rich-nan-1.log": RICH_NAN_FINAL,
  "sdscripts-success-1.log": progress({
    phase: "saving",
    step: 2000,
    total_steps: 2000,
    loss: 0.0702,
    eta_s: 0,
    seconds_per_step: 1 / 1.75,
  }),
};

describe("a nan loss whatever the bar's total", () => {
  // The real rich-logging NaN run's five redraws (steps 41..205 of 3280), read by a run that expects 400 steps.
  test("a bar of another total is no progress, but each step of it with avr_loss=nan extends the streak", async () => {
    const text = await Bun.file(join(FIXTURES, "sdscripts-raw-redraws-1.log")).text();
    const folded = fold(splitAll([text]), initialProgress(400));
    expect(folded).toMatchObject({ step: 0, loss: null, contradicting_total: 3280, last_loss_nan: true, nan_streak: 5 });
  });

  test("contrast: the same bar twice at one step counts once, and a finite loss ends the streak", () => {
    const bar = (n: number, loss: string) => `steps:  1%|          | ${n}/3280 [00:01<1:00:00,  1.10s/it, avr_loss=${loss}]`;
    const start = initialProgress(400);
    expect(fold([bar(7, "nan"), bar(7, "nan"), bar(8, "nan")], start)).toMatchObject({ nan_streak: 2, last_loss_nan: true });
    expect(fold([bar(7, "nan"), bar(8, "nan"), bar(9, "0.12")], start)).toMatchObject({ nan_streak: 0, last_loss_nan: false });
  });
});

describe("progress from real sd-scripts logs", () => {
  test("a resumed run's bar, counting the steps left from 0, continues the run from its state's step", async () => {
    const smoke = await Bun.file(join(FIXTURES, "sdscripts-cpu-smoke-resumed-1.log")).text();
    expect(fold(splitAll([smoke]), initialProgress(6, 2))).toEqual({
      ...initialProgress(6, 2),
      phase: "done", step: 6, total_steps: 6, loss: 0.947, eta_s: 0, seconds_per_step: 8.92, sampling_step: 6,
    });
    const fast = await Bun.file(join(FIXTURES, "sdscripts-cpu-fast-resumed-cancelled-1.log")).text();
    expect(fold(splitAll([fast]), initialProgress(400, 40))).toEqual({
      ...initialProgress(400, 40),
      phase: "training", step: 80, total_steps: 400, loss: 0.901, eta_s: 2686, seconds_per_step: 8.39, sampling_step: null,
    });
  });

  const fixtureNames = Object.keys(fixtureFinals);

  test("every sd-scripts fixture on disk has an expected final progress", async () => {
    const onDisk = await Array.fromAsync(new Bun.Glob("sdscripts-*.log").scan(FIXTURES));
    expect(onDisk.toSorted()).toEqual(fixtureNames.toSorted());
  });

  for (const name of fixtureNames) {
    test(`${name} folds to its final step, total and loss`, async () => {
      const text = await Bun.file(join(FIXTURES, name)).text();
      expect(fold(splitAll([text]))).toEqual(fixtureFinals[name]!);
    });

    test(`${name} yields the same records whichever bytes the chunks break between`, async () => {
      const bytes = await Bun.file(join(FIXTURES, name)).bytes();
      const whole = splitAll([new TextDecoder().decode(bytes)]);
      for (const seed of [1, 2, 3, 42, 1337]) {
        expect(splitAll(decodeInChunks(bytes, seed))).toEqual(whole);
      }
    });
  }

  test("the random chunking does cut inside multi-byte characters", async () => {
    const bytes = await Bun.file(join(FIXTURES, "sdscripts-rich-1.log")).bytes();
    const sizes = randomSizes(1, 23);
    let cutsInsideCharacters = 0;
    for (let offset = sizes.next().value!; offset < bytes.byteLength; offset += sizes.next().value!) {
      if ((bytes[offset]! & 0xc0) === 0x80) cutsInsideCharacters++;
    }
    expect(cutsInsideCharacters).toBeGreaterThan(0);
  });
});

const barRun = [
  "prepare optimizer, data loader etc.\n",
  "caching latents.\n",
  "\r  0%|          | 0/20 [00:00<?, ?it/s]",
  "\r100%|██████████| 20/20 [00:02<00:00,  9.10it/s]\n",
  "running training / 学習開始\n",
  "  total optimization steps / 学習ステップ数: 400\n",
  "\rsteps:   0%|          | 0/400 [00:00<?, ?it/s]",
  "epoch 1/4\n",
  "\rsteps:   1%|          | 4/400 [00:06<09:54,  1.50s/it, avr_loss=0.12]",
  "\rsteps:  50%|█████     | 200/400 [02:00<02:00,  1.67it/s, avr_loss=0.0871]",
  "\nsaving checkpoint: /out/person-step00000200.safetensors\n",
  "\rsteps: 100%|██████████| 400/400 [04:00<00:00,  1.67it/s, avr_loss=0.0802]",
  "\nsaving checkpoint: /out/person.safetensors\n",
  "model saved.\n",
];

describe("LineSplitter", () => {
  test("ends records at \\r, \\n and \\r\\n, drops empty ones and keeps the incomplete tail", () => {
    const splitter = new LineSplitter();
    expect(splitter.push("a\rb\nc\r\n\r\nd")).toEqual(["a", "b", "c"]);
    expect(splitter.push("e\r")).toEqual(["de"]);
    expect(splitter.push("\nf")).toEqual([]);
    expect(splitter.flush()).toEqual(["f"]);
    expect(splitter.flush()).toEqual([]);
  });

  test("yields every tqdm redraw, which a split on \\n alone would lose", () => {
    const log = barRun.join("");
    const stepsSeen = (records: string[]) => {
      const steps: number[] = [];
      records.reduce((before, record) => {
        const after = applyLine(before, record);
        if (after.step !== before.step) steps.push(after.step);
        return after;
      }, initialProgress());
      return steps;
    };
    expect(stepsSeen(splitAll([log]))).toEqual([4, 200, 400]);
    expect(stepsSeen(log.split("\n"))).toEqual([400]);
  });

  test("keeps only the start of a record longer than the cap, then frames the next record normally", () => {
    const splitter = new LineSplitter();
    const block = "x".repeat(1024 * 1024);
    for (let i = 0; i < 4; i++) expect(splitter.push(block)).toEqual([]);
    const [capped, next] = splitter.push("\nsteps:   0% 0/10 [00:00<?, ?it/s]\n");
    expect(capped).toBe("x".repeat(MAX_RECORD_CHARS));
    expect(next).toBe("steps:   0% 0/10 [00:00<?, ?it/s]");
  });
});

describe("applyLine", () => {
  test("a steps bar in s/it gives the step, loss, eta and seconds per step", () => {
    const line = "steps:   1%|▏         | 4/400 [00:06<09:54,  1.50s/it, avr_loss=0.12]";
    expect(applyLine(initialProgress(), line)).toEqual(
      progress({ phase: "training", step: 4, total_steps: 400, loss: 0.12, eta_s: 594, seconds_per_step: 1.5 }),
    );
  });

  test("a steps bar in it/s is inverted to seconds per step and reads an H:MM:SS eta", () => {
    const line = "steps:  10%|█         | 160/1600 [01:20<1:02:03,  2.00it/s, avr_loss=0.0871]";
    expect(applyLine(initialProgress(), line)).toEqual(
      progress({ phase: "training", step: 160, total_steps: 1600, loss: 0.0871, eta_s: 3723, seconds_per_step: 0.5 }),
    );
  });

  test("a steps bar with trailing text glued after it still counts", () => {
    const line = "steps:   0%|          | 0/1500 [00:00<?, ?it/s]epoch 1/30";
    expect(applyLine(initialProgress(), line)).toEqual(progress({ phase: "training", total_steps: 1500 }));
  });

  test("a caching bar at 20/20 enters caching but does not move the step", () => {
    const line = "caching latents: 100%|██████████| 20/20 [00:02<00:00,  9.10it/s]";
    expect(applyLine(initialProgress(), line)).toEqual(progress({ phase: "caching" }));
  });

  test("a bar without description mid-training changes nothing and returns the same object", () => {
    const training = applyLine(initialProgress(), "steps:  50%|█████     | 200/400 [02:00<02:00,  1.67it/s, avr_loss=0.09]");
    expect(applyLine(training, "100%|██████████| 20/20 [00:02<00:00,  9.10it/s]")).toBe(training);
  });

  test("a line that changes something returns a new object and leaves the old one untouched", () => {
    const start = initialProgress();
    const next = applyLine(start, "caching latents.");
    expect(next).not.toBe(start);
    expect(start).toEqual(progress({}));
    expect(next.phase).toBe("caching");
  });

  test("the nan streak counts steps, not redraws, and a finite loss ends it", () => {
    const bar = (step: number, loss: string) => `steps:   3%|▎         | ${step}/400 [00:10<10:00,  1.50s/it, avr_loss=${loss}]`;
    const seen = [bar(9, "0.1"), bar(10, "nan"), bar(10, "nan"), bar(11, "nan")].reduce(applyLine, initialProgress());
    expect(seen).toMatchObject({ loss: 0.1, last_loss_nan: true, nan_streak: 2 });
    expect(applyLine(seen, bar(12, "0.2"))).toMatchObject({ loss: 0.2, last_loss_nan: false, nan_streak: 0 });
  });

  test("a full run walks loading, caching, training, saving, done, and a mid-run checkpoint is not the final save", () => {
    const phases: string[] = [];
    let current = initialProgress();
    for (const record of splitAll(barRun)) {
      current = applyLine(current, record);
      if (record.includes("step00000200")) expect(current.phase).toBe("training");
      if (phases.at(-1) !== current.phase) phases.push(current.phase);
    }
    expect(phases).toEqual(["loading", "caching", "training", "saving", "done"]);
    expect(current).toEqual(
      progress({ phase: "done", step: 400, total_steps: 400, loss: 0.0802, eta_s: 0, seconds_per_step: 1 / 1.67 }),
    );
  });

  test("the old final save line enters saving", () => {
    const training = applyLine(initialProgress(), "epoch 3/10");
    expect(applyLine(training, "save trained model")).toEqual(progress({ phase: "saving" }));
  });

  test("the phase never moves backwards", () => {
    const done = applyLine(initialProgress(), "model saved.");
    expect(applyLine(done, "caching latents.")).toBe(done);
    expect(applyLine(done, "steps:  50%|█████     | 200/400 [02:00<02:00,  1.67it/s]").phase).toBe("done");
  });
});
