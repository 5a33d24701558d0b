import { afterEach, describe, expect, test } from "bun:test";
import { linkSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tokensAtMost } from "../../src/dataset/clip-tokens.ts";
import { gifSize } from "../../src/dataset/gif-size.ts";
import { DatasetInvalid, prepareCopy, type PrepareFor } from "../../src/dataset/prepare.ts";
import type { TokenWindow } from "../../src/job.ts";
import { solidPng } from "../../src/png.ts";
import { waitFor } from "../support/wait.ts";
import {
  claimedPng, cornersPng, gifImage, jpegWithOrientation, pngWithOrientation, tiffImage,
} from "../support/exif.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function copyDir(files: Record<string, string | Uint8Array>): string {
  const dir = mkdtempSync(join(tmpdir(), "lora-worker-prepare-"));
  dirs.push(dir);
  for (const [name, data] of Object.entries(files)) writeFileSync(join(dir, name), data);
  return dir;
}

// Buckets around 8 px, so the small test images here train at scale 1 unless a test says otherwise.
const TINY_BUCKETS = { resolution: 8, minBucketReso: 4, maxBucketReso: 64, bucketResoSteps: 4 };
const TARGET: PrepareFor = {
  trigger: "ohwx", subjectClass: "person", buckets: TINY_BUCKETS, folder: "10_ohwx person",
  tokens: { count: tokensAtMost, by: "upper bound" },
};
// A caption of `n` tokens as tokensAtMost counts them: one per letter.
const tokens = (n: number) => Array.from({ length: n }, () => "a").join(" ");
const shownAs = (name: string) => `10_ohwx person/${name}`;
const png = (shade: number) => solidPng(8, 8, [shade, 10, 10]);

describe("the job's copy made ready for the trainer", () => {
  test("a caption without the trigger gets it in front; one with it, and an image without a caption, stay", async () => {
    const dir = copyDir({
      "a.png": png(1), "a.txt": "a man smiling, outdoors",
      "b.png": png(2), "b.txt": "OHWX, close-up\nnotes",
      "c.png": png(3),
    });
    const report = await prepareCopy(dir, shownAs, TARGET);
    expect(report.captions).toEqual({
      trigger_added: 1, trigger_present: 1, trigger_moved: 0, images_without_caption: 1, cut: [],
      tokens_counted_by: "upper bound",
    });
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("ohwx person, a man smiling, outdoors");
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("OHWX, close-up\nnotes");
    expect(report.files).toEqual([
      { file: "10_ohwx person/a.txt", did: "trigger_added", prefix: "ohwx person, " },
      { file: "10_ohwx person/b.txt", did: "caption_kept" },
      { file: "10_ohwx person/c.png", did: "no_caption", trains_on: "ohwx person" },
    ]);
    expect(report.files_not_listed).toBe(0);
    expect(report.warnings).toEqual([]);
  });

  test("a caption is written beside and renamed: a hard link to it elsewhere (a resume's copy) keeps its text", async () => {
    const dir = copyDir({ "a.png": png(1), "a.txt": "a man" });
    const other = join(dir, "linked.caption");
    linkSync(join(dir, "a.txt"), other);
    await prepareCopy(dir, shownAs, TARGET);
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("ohwx person, a man");
    // Contrast: the link still names the file as it was; an in-place write would have changed both.
    expect(readFileSync(other, "utf8")).toBe("a man");
  });

  test("an image stored turned is stored upright, as PNG under its own name, exactly as a viewer shows it", async () => {
    const turned = await jpegWithOrientation(cornersPng(), 6);
    const dir = copyDir({ "phone.jpg": turned, "flat.png": pngWithOrientation(cornersPng(), 1) });
    const report = await prepareCopy(dir, shownAs, TARGET);
    expect(report.turned_upright).toEqual(["10_ohwx person/phone.jpg"]);
    expect(report.files).toContainEqual(
      { file: "10_ohwx person/phone.jpg", did: "turned_upright", stored_as: "10_ohwx person/phone.jpg" },
    );
    const stored = new Uint8Array(readFileSync(join(dir, "phone.jpg")));
    expect(await new Bun.Image(stored).metadata()).toEqual({ width: 4, height: 6, format: "png" });
    // What Bun's own EXIF handling (libjpeg-turbo's orientation) shows of the original, pixel for pixel.
    const shown = await new Bun.Image(turned).png().bytes();
    expect(await new Bun.Image(stored).png().bytes()).toEqual(shown);
    // Contrast: the stored pixels as they were are not that picture.
    expect(await new Bun.Image(turned, { autoOrient: false }).png().bytes()).not.toEqual(shown);
  });

  test("every orientation is turned as a viewer turns it", async () => {
    for (const orientation of [2, 3, 4, 5, 6, 7, 8]) {
      const jpeg = await jpegWithOrientation(cornersPng(), orientation);
      const dir = copyDir({ "p.jpg": jpeg });
      await prepareCopy(dir, shownAs, TARGET);
      const stored = await new Bun.Image(new Uint8Array(readFileSync(join(dir, "p.jpg")))).png().bytes();
      expect({ orientation, same: Bun.deepEquals(stored, await new Bun.Image(jpeg).png().bytes()) })
        .toEqual({ orientation, same: true });
    }
  });

  test("images sd-scripts scales up into their bucket are named with the scale; identical images are named", async () => {
    const dir = copyDir({
      "big.png": solidPng(16, 16, [1, 2, 3]), "tiny.png": solidPng(4, 6, [4, 5, 6]),
      "one.png": png(9), "two.png": png(9),
    });
    // At 12: 16x16 goes to the 12x12 bucket (scale 0.75), 8x8 to it at 1.5, 4x6 to 8x16 at 16/6.
    const report = await prepareCopy(dir, shownAs, { ...TARGET, buckets: { ...TINY_BUCKETS, resolution: 12 } });
    expect(report.small).toEqual([
      { image: "10_ohwx person/one.png", width: 8, height: 8, scale: 1.5 },
      { image: "10_ohwx person/tiny.png", width: 4, height: 6, scale: 16 / 6 },
      { image: "10_ohwx person/two.png", width: 8, height: 8, scale: 1.5 },
    ]);
    expect(report.duplicates).toEqual([["10_ohwx person/one.png", "10_ohwx person/two.png"]]);
    expect(report.files).toContainEqual({ file: "10_ohwx person/two.png", did: "duplicate", same_as: "10_ohwx person/one.png" });
    expect(report.files).toContainEqual({ file: "10_ohwx person/tiny.png", did: "small", scale: 16 / 6 });
  });

  test("a photo of fewer pixels than the resolution squared is not small when its bucket fits it (sd-scripts' rule)", async () => {
    const sdxl = { resolution: 768, minBucketReso: 256, maxBucketReso: 2048, bucketResoSteps: 64 };
    const dir = copyDir({ "fits.png": solidPng(640, 896, [1, 2, 3]), "under.png": solidPng(600, 800, [4, 5, 6]) });
    const report = await prepareCopy(dir, shownAs, { ...TARGET, buckets: sdxl });
    // Contrast: both are under 768 x 768 pixels; only the one its bucket (640x896) is larger than is upscaled.
    expect(report.small).toEqual([{ image: "10_ohwx person/under.png", width: 600, height: 800, scale: 1.12 }]);
  });

  test("the context is the smallest that holds the longest caption: 75, 150 or 225 tokens, named with it", async () => {
    const cases: Array<[number, TokenWindow]> = [[60, 75], [75, 75], [76, 150], [150, 150], [151, 225], [300, 225]];
    for (const [length, window] of cases) {
      const dir = copyDir({ "a.png": png(1), "a.txt": `ohwx ${tokens(length - 4)}`, "b.png": png(2), "b.txt": "ohwx" });
      const report = await prepareCopy(dir, shownAs, TARGET);
      expect({ length, window: report.token_window }).toEqual({
        // Counted up to 225, and 226 for any longer (dataset/clip-tokens.ts).
        length, window: { tokens: window, longest: { caption: "10_ohwx person/a.txt", tokens: Math.min(length, 226) } },
      });
      expect(report.captions.cut).toEqual(length > 225 ? [{ caption: "10_ohwx person/a.txt", tokens: 226 }] : []);
    }
  });

  test("the trigger a caption gets in front counts toward the context", async () => {
    // 72 tokens, then "ohwx person, " (4 + 6 + 1 by the bound) in front: past 75.
    const dir = copyDir({ "a.png": png(1), "a.txt": tokens(72) });
    const report = await prepareCopy(dir, shownAs, TARGET);
    expect(report.token_window).toEqual({ tokens: 150, longest: { caption: "10_ohwx person/a.txt", tokens: 83 } });
  });

  test("a caption whose trigger lies past the context gets it in front; one whose trigger lies within keeps it", async () => {
    const dir = copyDir({
      "late.png": png(1), "late.txt": `${tokens(230)} ohwx`,
      "early.png": png(2), "early.txt": `ohwx ${tokens(230)}`,
    });
    const report = await prepareCopy(dir, shownAs, TARGET);
    expect(readFileSync(join(dir, "late.txt"), "utf8")).toBe(`ohwx person, ${tokens(230)} ohwx`);
    // Contrast: the same length with the trigger first stays as it was.
    expect(readFileSync(join(dir, "early.txt"), "utf8")).toBe(`ohwx ${tokens(230)}`);
    expect(report.captions).toMatchObject({ trigger_moved: 1, trigger_present: 1, trigger_added: 0 });
    expect(report.files).toContainEqual(
      { file: "10_ohwx person/late.txt", did: "trigger_moved", prefix: "ohwx person, " },
    );
    expect(report.token_window?.tokens).toBe(225);
  });

  test("the notes list the first 50 files and count the rest", async () => {
    const names = Array.from({ length: 60 }, (_, i) => `i${String(i).padStart(2, "0")}.png`);
    const report = await prepareCopy(copyDir(Object.fromEntries(names.map((n, i) => [n, png(i)]))), shownAs, TARGET);
    expect(report.files).toHaveLength(50);
    expect(report.files?.[49]).toEqual({ file: "10_ohwx person/i49.png", did: "no_caption", trains_on: "ohwx person" });
    expect(report.files_not_listed).toBe(10);
    expect(report.captions.images_without_caption).toBe(60);
  });

  test("a kohya folder naming another trigger or class is a warning; the request's are trained", async () => {
    const dir = copyDir({ "a.png": png(1), "a.txt": "a man" });
    const report = await prepareCopy(dir, shownAs, { ...TARGET, folder: "10_sks man" });
    expect(report.warnings).toEqual([
      'the folder "10_sks man" names "sks man", the request "ohwx person": the request\'s trigger and class are ' +
        'trained (the captions are led with "ohwx person, " and images without a caption train on "ohwx person")',
    ]);
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("ohwx person, a man");
    // Contrast: the folder that names them (the trigger in any case, as CLIP lowercases it) warns of nothing.
    for (const folder of ["10_ohwx person", "3_OHWX person", null]) {
      const same = await prepareCopy(copyDir({ "a.png": png(1) }), shownAs, { ...TARGET, folder });
      expect({ folder, warnings: same.warnings }).toEqual({ folder, warnings: [] });
    }
  });

  test("bytes that are no image the worker reads, and a caption that is not UTF-8, end it naming the file", async () => {
    const broken = copyDir({ "a.png": "not a picture" });
    await expect(prepareCopy(broken, shownAs, TARGET)).rejects.toThrow(
      new DatasetInvalid(
        "10_ohwx person/a.png is none of the image formats the worker reads (Bun.Image reads PNG, JPEG, WebP, GIF " +
          "and BMP, and the worker reads a TIFF's header; Bun.Image: ERR_IMAGE_UNKNOWN_FORMAT)",
      ),
    );
    const latin1 = copyDir({ "a.png": png(1), "a.txt": Uint8Array.of(0x63, 0x61, 0x66, 0xe9) });
    await expect(prepareCopy(latin1, shownAs, TARGET)).rejects.toThrow(
      new DatasetInvalid("10_ohwx person/a.txt is not UTF-8 text: sd-scripts stops the run on it"),
    );
  });

  test("a TIFF under a .png name, which Bun.Image cannot decode, trains untouched, its size read from its header", async () => {
    const tiff = tiffImage(6, 4);
    const dir = copyDir({ "scan.png": tiff });
    // Contrast: the worker's decoder refuses these very bytes.
    expect(await new Bun.Image(tiff).metadata().catch((err) => err.code)).toBe("ERR_IMAGE_FORMAT_UNSUPPORTED");
    const report = await prepareCopy(dir, shownAs, { ...TARGET, buckets: { ...TINY_BUCKETS, resolution: 12 } });
    expect(new Uint8Array(readFileSync(join(dir, "scan.png")))).toEqual(tiff);
    // At 12, 6 x 4 goes to the 12 x 12 bucket (tied with 16 x 8, the first in sd-scripts' order), scaled 3 times.
    expect(report).toMatchObject({ turned_upright: [], small: [{ image: "10_ohwx person/scan.png", width: 6, height: 4, scale: 3 }] });
  });

  test("a TIFF stored turned is refused, naming its orientation: the worker cannot turn what it cannot decode", async () => {
    const dir = copyDir({ "scan.png": tiffImage(6, 4, 6) });
    await expect(prepareCopy(dir, shownAs, TARGET)).rejects.toThrow(
      new DatasetInvalid(
        "10_ohwx person/scan.png is a TIFF stored turned (EXIF orientation 6), which the worker cannot decode to " +
          "turn upright: stored as PNG or JPEG, it would be turned",
      ),
    );
  });

  test("an image within Pillow's refusal trains and is named past its warning; past the refusal it is refused", async () => {
    // 10,000 x 10,000 = 100 M pixels: over MAX_IMAGE_PIXELS (89,478,485), under twice it. Read, never decoded.
    const dir = copyDir({ "big.png": claimedPng(10_000, 10_000), "fine.png": claimedPng(9_000, 9_000) });
    const report = await prepareCopy(dir, shownAs, TARGET);
    expect(report.large).toEqual([{ image: "10_ohwx person/big.png", width: 10_000, height: 10_000 }]);
    // Twice MAX_IMAGE_PIXELS exactly is the most Pillow reads; one row more is refused.
    const edge = copyDir({ "edge.png": claimedPng(17_895_697, 10) });
    expect((await prepareCopy(edge, shownAs, TARGET)).large).toHaveLength(1);
    const over = copyDir({ "over.png": claimedPng(17_895_697, 11) });
    await expect(prepareCopy(over, shownAs, TARGET)).rejects.toThrow(
      new DatasetInvalid(
        "10_ohwx person/over.png is 17895697x11, 196852667 pixels: Pillow, which sd-scripts reads images with, " +
          "refuses an image over 178956970 pixels as a decompression bomb",
      ),
    );
  });

  test("a GIF is sized by its logical screen, as Pillow sizes it: an 8x8 frame on 16000x16000 is refused", async () => {
    // Under .png names: sd-scripts finds images by extension, and Pillow reads them by content.
    const bomb = gifImage([16_000, 16_000], [8, 8]);
    // Contrast: the worker's decoder reads it as its frame, 8 x 8.
    expect(await new Bun.Image(bomb).metadata()).toMatchObject({ format: "gif", width: 8, height: 8 });
    await expect(prepareCopy(copyDir({ "frame.png": bomb }), shownAs, TARGET)).rejects.toThrow(
      new DatasetInvalid(
        "10_ohwx person/frame.png is 16000x16000, 256000000 pixels: Pillow, which sd-scripts reads images with, " +
          "refuses an image over 178956970 pixels as a decompression bomb",
      ),
    );
    // A frame past its screen grows it, as Pillow's first seek does (Pillow 13.0.0 opened this one as 10 x 11).
    expect(gifSize(gifImage([4, 4], [8, 8], [2, 3]))).toEqual({ width: 10, height: 11 });
    const wide = await prepareCopy(copyDir({ "wide.png": gifImage([10_000, 10_000], [8, 8]) }), shownAs, TARGET);
    expect(wide.large).toEqual([{ image: "10_ohwx person/wide.png", width: 10_000, height: 10_000 }]);
  });

  test("a cancel while an image is turned ends the preparation before the turn, which then writes nothing", async () => {
    const big = pngWithOrientation(solidPng(2500, 2500, [9, 9, 9]), 6);
    const dir = copyDir({ "phone.png": big });
    const turn = () => new Bun.Image(big, { autoOrient: false }).rotate(90).png().bytes();
    const abort = new AbortController();
    const cpu = process.cpuUsage();
    const preparing = prepareCopy(dir, shownAs, TARGET, abort.signal).catch((err: Error) => err.message);
    // The same turn, started beside it, ends about when the preparation's would.
    const beside = turn().then(() => "turned");
    // Bun.Image works on threads of its own: once this process has spent a tenth of a second of CPU, both turns
    // are under way (the reads before them take a few milliseconds).
    await waitFor(() => process.cpuUsage(cpu).user > 100_000, "the turns to be under way");
    abort.abort(new Error("cancelled"));
    expect(await Promise.race([preparing, beside])).toBe("cancelled");
    // Once a whole turn more has run, the abandoned one is long done: it wrote nothing.
    await beside;
    await turn();
    expect(readdirSync(dir)).toEqual(["phone.png"]);
    expect(new Uint8Array(readFileSync(join(dir, "phone.png")))).toEqual(new Uint8Array(big));
    // Contrast: not cancelled, the same image is turned and written.
    expect((await prepareCopy(dir, shownAs, TARGET)).turned_upright).toEqual(["10_ohwx person/phone.png"]);
    expect(new Uint8Array(readFileSync(join(dir, "phone.png")))).not.toEqual(new Uint8Array(big));
  }, 30_000); // four turns of a 6-megapixel photo, one after another on a loaded host: more than the default 5 s
});
