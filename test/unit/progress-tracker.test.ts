import { describe, expect, test } from "bun:test";
import { createTracker } from "../../src/progress/tracker.ts";

const bar = (n: number, total: number, loss?: string) => `\rsteps:  ${Math.floor((100 * n) / total)}%|#         | ${n}/${total} [00:0${n % 10}<01:40,  1.00s/it${loss === undefined ? "" : `, avr_loss=${loss}`}]`;

// A clock the test moves by hand: the persist cadence is decided by it alone.
function tracker(expectedTotal: number | null = 400, nanUpdates = 3) {
  let t = 0;
  const tr = createTracker({ expectedTotal, nanUpdates, persistEveryMs: 1000, now: () => t });
  return { tr, advance: (ms: number) => (t += ms) };
}

describe("the progress tracker, with no process", () => {
  test("a redraw counts as soon as its ] is written, not at the next \\r", () => {
    const { tr } = tracker();
    expect(tr.push(bar(1, 400, "0.5")).changed).toBe(true);
    expect(tr.progress()).toMatchObject({ step: 1, loss: 0.5 });
  });

  test("contrast: a redraw cut before its ] is not progress yet", () => {
    const { tr } = tracker();
    expect(tr.push(bar(1, 400, "0.5").slice(0, -5)).changed).toBe(false);
    expect(tr.progress().step).toBe(0);
  });

  test("one loss point per step, the last redraw of a step winning, nan as null", () => {
    const { tr } = tracker();
    tr.push(bar(1, 400) + bar(1, 400, "0.5") + bar(2, 400, "0.4") + bar(3, 400, "nan") + bar(3, 400, "nan"));
    tr.flush();
    const byStep = new Map(tr.pendingLoss());
    expect([...byStep]).toEqual([[1, 0.5], [2, 0.4], [3, null]]);
  });

  test("a bar past its total or of another total adds no point", () => {
    const { tr } = tracker();
    tr.push(bar(400, 400, "0.1") + bar(401, 400, "0.2") + bar(5, 1000, "0.3"));
    expect(tr.pendingLoss()).toEqual([[400, 0.1]]);
  });

  const cadence: Array<[string, (t: ReturnType<typeof tracker>) => boolean]> = [
    ["the first change is due at once", ({ tr }) => tr.push(bar(1, 400, "0.5")).persistDue],
    ["a change within the interval after a write is not due", ({ tr }) => (tr.push(bar(1, 400)), tr.persisted(true), tr.push(bar(2, 400)).persistDue)],
    ["a change after the interval is due", ({ tr, advance }) => (tr.push(bar(1, 400)), tr.persisted(true), advance(1000), tr.push(bar(2, 400)).persistDue)],
    ["a new phase is due within the interval", ({ tr }) => (tr.push(bar(1, 400)), tr.persisted(true), tr.push("model saved.\n").persistDue)],
    ["output that changes nothing is never due", ({ tr, advance }) => (advance(5000), tr.push("some warning\n").persistDue)],
  ];
  for (const [name, run] of cadence) {
    test(`persist cadence: ${name}`, () => {
      expect(run(tracker())).toBe(!name.includes("not due") && !name.includes("never"));
    });
  }

  test("points stay pending until a write that carried them succeeds", () => {
    const { tr } = tracker();
    tr.push(bar(1, 400, "0.5"));
    tr.persisted(false);
    expect(tr.pendingLoss()).toEqual([[1, 0.5]]);
    tr.persisted(true);
    expect(tr.pendingLoss()).toEqual([]);
  });

  test("the nan limit trips once, on the update that reaches it", () => {
    const { tr } = tracker(400, 3);
    const trips = [bar(1, 400, "nan"), bar(2, 400, "nan"), bar(3, 400, "nan"), bar(4, 400, "nan")].map((b) => tr.push(b).nanTripped);
    expect(trips).toEqual([false, false, true, false]);
  });

  test("a contradicting total is reported once", () => {
    const { tr } = tracker();
    expect([tr.push(bar(1, 1000)).contradiction, tr.push(bar(2, 1000)).contradiction]).toEqual([1000, null]);
  });

  test("sampling pauses training at a checkpoint: a redraw of the sampled step keeps it, the next step or the save ends it", () => {
    const { tr } = tracker(12);
    const sampling = "\ngenerating sample images at step / サンプル画像生成 ステップ: 8\n";
    tr.push(bar(7, 12, "0.2") + sampling);
    expect(tr.progress()).toMatchObject({ phase: "sampling", step: 7 });
    // tqdm throttled the redraw of step 8, and draws it when it closes at an exit.
    tr.push(`prompt: ohwx person\n${bar(8, 12, "0.2")}\n`);
    expect(tr.progress()).toMatchObject({ phase: "sampling", step: 8 });
    tr.push("\nsaving checkpoint: /out/l-step00000008.safetensors\n");
    expect(tr.progress().phase).toBe("training");
    tr.push(bar(9, 12, "0.2"));
    expect(tr.progress()).toMatchObject({ phase: "training", step: 9 });
  });

  test("a resumed run reports in the whole run's terms: its bar's 0 is the state's step", () => {
    const tr = createTracker({ expectedTotal: 400, resumedAt: 40, nanUpdates: 3, persistEveryMs: 1000 });
    expect(tr.progress()).toMatchObject({ step: 40, total_steps: 400 });
    tr.push(bar(0, 360) + bar(5, 360, "0.1"));
    expect(tr.progress()).toMatchObject({ step: 45, total_steps: 400, contradicting_total: null });
    expect(tr.pendingLoss()).toEqual([[45, 0.1]]);
    // Contrast: a bar counting the whole run again is another total, not progress.
    tr.push(bar(50, 400, "0.1"));
    expect(tr.progress()).toMatchObject({ step: 45, contradicting_total: 440 });
  });

  test("a flood of redraws in one chunk ends where the same redraws one by one end", () => {
    const redraws = [bar(1, 400, "0.5"), bar(1, 400, "nan"), bar(1, 400, "nan"), bar(2, 400, "nan"), bar(2, 400, "0.3"),
      bar(3, 400, "nan"), bar(3, 400, "nan"), bar(4, 400, "nan"), bar(4, 400, "nan")];
    const oneByOne = tracker(400, 10).tr;
    for (const redraw of redraws) oneByOne.push(redraw);
    const chunked = tracker(400, 10).tr;
    chunked.push(redraws.join(""));
    expect(chunked.progress()).toEqual(oneByOne.progress());
    expect(chunked.progress()).toMatchObject({ step: 4, nan_streak: 2, last_loss_nan: true });
    // The chunk keeps one point per step: the last redraw of each step.
    expect(chunked.pendingLoss()).toEqual([[1, null], [2, 0.3], [3, null], [4, null]]);
  });

  test("contrast: a redraw followed on its line by a message is not skipped for the next redraw of its step", () => {
    const { tr } = tracker(2);
    tr.push(`${bar(2, 2, "0.1")}model saved.${bar(2, 2, "0.1")}`);
    expect(tr.progress().phase).toBe("done");
  });
});
