import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { applyLine, initialProgress } from "../../src/progress/progress.ts";
import { makeHostTree } from "../support/host-tree.ts";
import { dispatchOk, realModeConfig, supervisorFor, TRAINERS } from "../support/real-mode.ts";

// Item 8 of issue 11: a steps bar counting past its total once wrote 556,499 loss points for a 400-step job.
// At most one point per step of the run; bars that contradict the tier's total stay in the log only.

const bar = (n: number, total: number, loss = 0.5) => `steps:   1%|          | ${n}/${total} [00:01<00:01,  1.00s/it, avr_loss=${loss}]`;

describe("what the trainer prints cannot grow the database without bound", () => {
  test("a bar counting to 5000 of 400, and bars of another total, leave one loss point per step of the 400", async () => {
    using tree = makeHostTree();
    const trainer = join(TRAINERS, "counts-past-total.sh");
    await using s = supervisorFor(tree, realModeConfig(tree, trainer), [trainer]);
    const job = await dispatchOk(s, tree.validRequest());
    await s.supervisor.untilIdle();

    const row = s.store.get(job.id)!;
    expect(row).toMatchObject({ status: "failed", error_code: "output_missing", exit_code: 0, step: 400, total_steps: 400 });
    const steps = s.store.lossHistory(job.id).map(([step]) => step);
    expect(steps.length).toBeLessThanOrEqual(400);
    expect(steps).toEqual(Array.from({ length: 400 }, (_, i) => i + 1));

    // The over-counting redraws are kept in the log, where the operator can read them.
    const log = readFileSync(row.log_path, "utf8");
    expect(log).toContain("| 5000/400 [");
    expect(log).toContain("| 1050/100000 [");
    // Contrast: taken as progress, what was printed would have made far more than 400 points.
    const printed = new Set([...log.matchAll(/\| (\d+)\/(?:400|100000) \[/g)].map((m) => Number(m[1])));
    expect(printed.size).toBe(5000);
  });
});

describe("progress against the run's own total", () => {
  test("with the tier's total of 400, a bar of another total is not progress", () => {
    const start = initialProgress(400);
    // Only the anomaly (and where its bar stood, for a nan streak) is noted; step, total and loss stay as they were.
    expect(applyLine(start, bar(5, 100_000))).toEqual({ ...start, contradicting_total: 100_000, contradicting_n: 5 });
    // Contrast: the same bar against 400 is.
    expect(applyLine(start, bar(5, 400))).toMatchObject({ step: 5, total_steps: 400, loss: 0.5 });
  });

  test("with the tier's total of 400, a bar past its total is not progress", () => {
    const done = applyLine(initialProgress(400), bar(400, 400, 0.1));
    expect(done).toMatchObject({ step: 400, total_steps: 400, loss: 0.1, phase: "saving" });
    expect(applyLine(done, bar(401, 400, 0.2))).toBe(done);
  });

  test("without an expected total (a replayed recording), the first total announced becomes it and a contradicting one is refused", () => {
    const first = applyLine(initialProgress(), bar(3, 200));
    expect(first).toMatchObject({ step: 3, total_steps: 200, expected_total: 200 });
    expect(applyLine(first, bar(4, 300))).toEqual({ ...first, contradicting_total: 300, contradicting_n: 4 });
    // Contrast: the next step of the announced total is taken.
    expect(applyLine(first, bar(4, 200))).toMatchObject({ step: 4, total_steps: 200 });
  });

  test("without an expected total, a total announced in a message decides which bars count", () => {
    const announced = applyLine(initialProgress(), "  total optimization steps / 学習ステップ数: 200");
    expect(announced).toMatchObject({ total_steps: 200, expected_total: 200 });
    expect(applyLine(announced, bar(1, 300))).toEqual({ ...announced, contradicting_total: 300, contradicting_n: 1 });
    expect(applyLine(announced, bar(1, 200))).toMatchObject({ step: 1, total_steps: 200 });
  });
});
