import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { solidPng } from "../../src/png.ts";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { ensureBinary } from "../support/binary.ts";
import { runCli } from "../support/cli-process.ts";
import { cornersPng, jpegWithOrientation } from "../support/exif.ts";
import { SIMULATE_TABLES, makeHostTree, type HostTree } from "../support/host-tree.ts";
import { ENDED_STATUSES } from "../support/jobs.ts";
import { waitFor } from "../support/wait.ts";
import { startWorker } from "../support/worker-process.ts";

// Real processes on a shared 2-core machine: generous bounds, conditions waited on, never slept.
setDefaultTimeout(60_000);

let binary: string;
beforeAll(() => {
  binary = ensureBinary();
}, 120_000);

// arbo's dataset as a studio sends it: a kohya folder of phone photos, captioned without the trigger.
function studioDataset(tree: HostTree): string {
  rmSync(tree.dataset, { recursive: true });
  const folder = join(tree.dataset, "10_ohwx person");
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "a.png"), solidPng(8, 8, [10, 20, 30]));
  writeFileSync(join(folder, "a.txt"), "a woman in a red coat, smiling");
  writeFileSync(join(folder, "b.png"), solidPng(8, 8, [40, 50, 60]));
  writeFileSync(join(folder, "b.txt"), "Ohwx, close-up portrait");
  writeFileSync(join(folder, "c.png"), solidPng(8, 8, [40, 50, 60]));
  return folder;
}

// The ended job's record, and what `lora-worker status ID` prints of it.
async function trainedJob(tree: HostTree): Promise<any> {
  await using worker = await startWorker(tree.writeConfig(SIMULATE_TABLES(0.002)), { command: [binary] });
  const dispatched = await worker.postTrain(tree.validRequest());
  expect(dispatched.status).toBe(200);
  const id = dispatched.body.worker_job_id;
  const ended = await waitFor(async () => {
    const { body } = await worker.json(`/train/${id}`);
    return ENDED_STATUSES.includes(body.status) ? body : null;
  }, "the job to end", 30_000);
  const status = await runCli(binary, ["status", id], { LORA_WORKER_URL: worker.url });
  return { ...ended, statusLines: status.stdout.split("\n") };
}

describe("the dataset the trainer reads is the one a person meant", () => {
  test("a caption without the trigger reaches the trainer with it; the record says what was done", async () => {
    using tree = makeHostTree(0);
    const folder = studioDataset(tree);
    writeFileSync(join(folder, "d.jpg"), await jpegWithOrientation(cornersPng(), 6));
    const final = await trainedJob(tree);

    expect(final.status).toBe("succeeded");
    const at = (name: string) => `10_ohwx person/${name}`;
    expect(final.dataset.prepared).toEqual({
      captions: {
        trigger_added: 1, trigger_present: 1, trigger_moved: 0, images_without_caption: 2, cut: [],
        tokens_counted_by: "upper bound",
      },
      // Counted by the bound (no tokenizer here): the led caption's bytes but its spaces.
      token_window: { tokens: 75, longest: { caption: at("a.txt"), tokens: 35 } },
      turned_upright: [at("d.jpg")],
      small: ["a.png", "b.png", "c.png", "d.jpg"].map((name) => ({
        // d.jpg is stored 6 x 4 and seen (and now stored) 4 x 6: the 640x896 bucket at 768, 160 times it.
        image: at(name), width: name === "d.jpg" ? 4 : 8, height: name === "d.jpg" ? 6 : 8, scale: name === "d.jpg" ? 160 : 96,
      })),
      large: [],
      duplicates: [[at("b.png"), at("c.png")]],
      files: [
        { file: at("a.png"), did: "small", scale: 96, text: "small: scaled up 96x" },
        { file: at("a.txt"), did: "trigger_added", prefix: "ohwx person, ", text: 'trigger added ("ohwx person, " in front)' },
        { file: at("b.png"), did: "small", scale: 96, text: "small: scaled up 96x" },
        { file: at("b.txt"), did: "caption_kept", text: "caption kept" },
        { file: at("c.png"), did: "small", scale: 96, text: "small: scaled up 96x" },
        { file: at("c.png"), did: "duplicate", same_as: at("b.png"), text: `the same bytes as ${at("b.png")}` },
        { file: at("c.png"), did: "no_caption", trains_on: "ohwx person", text: 'no caption: trains on "ohwx person"' },
        { file: at("d.jpg"), did: "turned_upright", stored_as: at("d.jpg"), text: `turned upright, re-encoded as PNG: ${at("d.jpg")}` },
        { file: at("d.jpg"), did: "small", scale: 160, text: "small: scaled up 160x" },
        { file: at("d.jpg"), did: "no_caption", trains_on: "ohwx person", text: 'no caption: trains on "ohwx person"' },
      ],
      files_not_listed: 0,
      warnings: [],
      // A simulated worker without [likeness] python scores no face, and says so.
      identity: {
        scored: false, reason: "scorer_missing", photos: { one_face: 0, no_face: 0, several_faces: 0 },
        spread: null, threshold: 0.6, notes: [],
        text: "not scored: no face scorer (lora-worker doctor's likeness line says how to add it); 0 photos with one " +
          "face, 0 with none, 0 with several",
      },
    });
    // What the trainer trained on, from the LoRA's own header: the trigger leads a.png's caption now.
    const verdict = await verifySafetensors(final.lora_path);
    if (!verdict.ok) throw new Error(verdict.error.detail);
    expect(JSON.parse(verdict.value.metadata.ss_tag_frequency!)).toEqual({
      "10_ohwx person": { "ohwx person": 3, "a woman in a red coat": 1, smiling: 1, ohwx: 1, "close-up portrait": 1 },
    });
    expect(verdict.value.metadata["modelspec.trigger_phrase"]).toBe("ohwx");
    expect(verdict.value.metadata["modelspec.title"]).toBe("mylora");
    // arbo's files are as they were; the job's copy holds the changes.
    expect(readFileSync(join(folder, "a.txt"), "utf8")).toBe("a woman in a red coat, smiling");
    const copy = join(tree.state, "jobs", final.worker_job_id, "dataset", "10_ohwx person");
    expect(readFileSync(join(copy, "a.txt"), "utf8")).toBe("ohwx person, a woman in a red coat, smiling");
    expect(readFileSync(join(copy, "b.txt"), "utf8")).toBe("Ohwx, close-up portrait");
    expect(final.statusLines).toEqual(expect.arrayContaining([
      "captions trigger added to 1 caption, already in 1, 2 images without one",
      "upright  turned: 10_ohwx person/d.jpg",
      "same     10_ohwx person/b.png = 10_ohwx person/c.png",
      "context  75 tokens (no --max_token_length): the longest caption, 10_ohwx person/a.txt, has 35",
      "files    10_ohwx person/a.png: small: scaled up 96x",
      "         10_ohwx person/a.txt: trigger added (\"ohwx person, \" in front)",
      "         10_ohwx person/d.jpg: turned upright, re-encoded as PNG: 10_ohwx person/d.jpg",
    ]));
    // The trainer was given no --max_token_length: every caption fits one CLIP window.
    const argv: string[] = JSON.parse(readFileSync(join(tree.state, "jobs", final.worker_job_id, "launch.json"), "utf8")).argv;
    expect(argv.filter((flag) => flag.startsWith("--max_token_length"))).toEqual([]);
  });

  test("a kohya folder naming another trigger is trained as the request says, and the record and status warn of it", async () => {
    using tree = makeHostTree(0);
    const folder = join(tree.dataset, "10_sks man");
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "a.png"), solidPng(8, 8, [10, 20, 30]));
    writeFileSync(join(folder, "a.txt"), "sks man smiling");
    const final = await trainedJob(tree);
    expect(final.status).toBe("succeeded");
    const warning = 'the folder "10_sks man" names "sks man", the request "ohwx person": the request\'s trigger and ' +
      'class are trained (the captions are led with "ohwx person, " and images without a caption train on "ohwx person")';
    expect(final.dataset.prepared.warnings).toEqual([warning]);
    expect(final.statusLines).toContain(`warning  ${warning}`);
    const copy = join(tree.state, "jobs", final.worker_job_id, "dataset", "10_sks man");
    expect(readFileSync(join(copy, "a.txt"), "utf8")).toBe("ohwx person, sks man smiling");
  });

  test("an image in no format the worker reads ends the job dataset_invalid before the trainer starts, naming it", async () => {
    using tree = makeHostTree(0);
    const folder = studioDataset(tree);
    writeFileSync(join(folder, "broken.jpg"), "not a picture at all");
    const final = await trainedJob(tree);
    expect(final).toMatchObject({
      status: "failed",
      error_code: "dataset_invalid",
      error: `${tree.dataset}: 10_ohwx person/broken.jpg is none of the image formats the worker reads (Bun.Image ` +
        "reads PNG, JPEG, WebP, GIF and BMP, and the worker reads a TIFF's header; Bun.Image: ERR_IMAGE_UNKNOWN_FORMAT)",
    });
    expect(final.exit_code).toBeUndefined();
  });
});
