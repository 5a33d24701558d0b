import { afterEach, describe, expect, test } from "bun:test";
import { linkSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tokensAtMost } from "../../src/dataset/clip-tokens.ts";
import { DatasetInvalid, prepareCopy, type PrepareFor } from "../../src/dataset/prepare.ts";
import { solidPng } from "../../src/png.ts";
import { waitFor } from "../support/wait.ts";
import { claimedPng, cornersPng, jpegWithOrientation, pngWithOrientation, tiffImage } from "../support/exif.ts";

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

const TARGET: PrepareFor = {
  trigger: "ohwx", subjectClass: "person", resolution: 8, maxTokens: 225,
  tokens: { count: tokensAtMost, by: "upper bound" },
};
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
      trigger_added: 1, trigger_present: 1, images_without_caption: 1, cut: [], tokens_counted_by: "upper bound",
    });
    expect(readFileSync(join(dir, "a.txt"), "utf8")).toBe("ohwx person, a man smiling, outdoors");
    expect(readFileSync(join(dir, "b.txt"), "utf8")).toBe("OHWX, close-up\nnotes");
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

  test("small images and identical images are named; bigger, distinct ones are not", async () => {
    const dir = copyDir({
      "big.png": solidPng(16, 16, [1, 2, 3]), "tiny.png": solidPng(4, 6, [4, 5, 6]),
      "one.png": png(9), "two.png": png(9),
    });
    const report = await prepareCopy(dir, shownAs, { ...TARGET, resolution: 12 });
    expect(report.small).toEqual([
      { image: "10_ohwx person/one.png", width: 8, height: 8 },
      { image: "10_ohwx person/tiny.png", width: 4, height: 6 },
      { image: "10_ohwx person/two.png", width: 8, height: 8 },
    ]);
    expect(report.duplicates).toEqual([["10_ohwx person/one.png", "10_ohwx person/two.png"]]);
  });

  test("a caption longer than the trainer reads is named with its count", async () => {
    const long = Array.from({ length: 40 }, (_, i) => `word${i}`).join(" ");
    const dir = copyDir({ "a.png": png(1), "a.txt": `ohwx ${long}`, "b.png": png(2), "b.txt": "ohwx short" });
    const report = await prepareCopy(dir, shownAs, { ...TARGET, maxTokens: 100 });
    expect(report.captions.cut).toEqual([{ caption: "10_ohwx person/a.txt", tokens: tokensAtMost(`ohwx ${long}`) }]);
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
    const report = await prepareCopy(dir, shownAs, { ...TARGET, resolution: 12 });
    expect(new Uint8Array(readFileSync(join(dir, "scan.png")))).toEqual(tiff);
    expect(report).toMatchObject({ turned_upright: [], small: [{ image: "10_ohwx person/scan.png", width: 6, height: 4 }] });
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
