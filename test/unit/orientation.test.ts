import { describe, expect, test } from "bun:test";
import { readOrientation } from "../../src/dataset/orientation.ts";
import {
  cornersPng, jpegWithOrientation, pngWithOrientation, webpWithOrientation,
} from "../support/exif.ts";

describe("EXIF orientation, read from the containers the trainer reads", () => {
  test("a JPEG's APP1 Exif segment, in either byte order", async () => {
    for (const orientation of [1, 2, 3, 4, 5, 6, 7, 8]) {
      expect(readOrientation(await jpegWithOrientation(cornersPng(), orientation))).toBe(orientation as never);
      expect(readOrientation(await jpegWithOrientation(cornersPng(), orientation, false))).toBe(orientation as never);
    }
  });

  test("a PNG's eXIf chunk and a WebP's EXIF chunk", async () => {
    expect(readOrientation(pngWithOrientation(cornersPng(), 6))).toBe(6);
    expect(readOrientation(await webpWithOrientation(cornersPng(), 8))).toBe(8);
  });

  test("contrast: a picture without EXIF, a value out of range and bytes of no image read as upright (1)", async () => {
    expect(readOrientation(cornersPng())).toBe(1);
    expect(readOrientation(await new Bun.Image(cornersPng()).jpeg().bytes())).toBe(1);
    expect(readOrientation(await jpegWithOrientation(cornersPng(), 9))).toBe(1);
    expect(readOrientation(new TextEncoder().encode("png"))).toBe(1);
    // A segment whose length runs past the file's end is not followed.
    expect(readOrientation(Uint8Array.from([0xff, 0xd8, 0xff, 0xe1, 0xff, 0xff, 0x45]))).toBe(1);
  });
});
