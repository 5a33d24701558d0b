// Pictures as phone cameras store them: pixels as the sensor read them, and an EXIF orientation that tells a viewer
// how to turn them. Built from the containers' own layouts (the TIFF IFD, JPEG's APP1, PNG's eXIf, RIFF's EXIF).
import { encodePng, solidPng } from "../../src/png.ts";

/** 6 x 4 pixels, each corner its own colour: a turn or a mirror of it is never the same picture. */
export function cornersPng(): Uint8Array {
  return encodePng(6, 4, (x, y) => {
    if (y < 2) return x < 3 ? [255, 0, 0] : [0, 255, 0];
    return x < 3 ? [0, 0, 255] : [255, 255, 0];
  });
}

/** A TIFF header and one IFD holding only the orientation (SHORT, count 1). */
export function orientationTiff(orientation: number, littleEndian = true): Uint8Array {
  const tiff = new Uint8Array(8 + 2 + 12 + 4);
  const view = new DataView(tiff.buffer);
  tiff.set(littleEndian ? [0x49, 0x49] : [0x4d, 0x4d], 0);
  view.setUint16(2, 42, littleEndian);
  view.setUint32(4, 8, littleEndian);
  view.setUint16(8, 1, littleEndian);
  view.setUint16(10, 0x0112, littleEndian);
  view.setUint16(12, 3, littleEndian);
  view.setUint32(14, 1, littleEndian);
  view.setUint16(18, orientation, littleEndian);
  return tiff;
}

const EXIF_PREFIX = [0x45, 0x78, 0x69, 0x66, 0, 0];

/** A JPEG of `png`'s pixels with an APP1 Exif segment right after SOI. */
export async function jpegWithOrientation(png: Uint8Array, orientation: number, littleEndian = true): Promise<Uint8Array> {
  const jpeg = await new Bun.Image(png).jpeg({ quality: 100 }).bytes();
  const body = Uint8Array.from([...EXIF_PREFIX, ...orientationTiff(orientation, littleEndian)]);
  const length = body.length + 2;
  const app1 = Uint8Array.from([0xff, 0xe1, length >> 8, length & 0xff, ...body]);
  return Uint8Array.from([...jpeg.subarray(0, 2), ...app1, ...jpeg.subarray(2)]);
}

/** `png` with an eXIf chunk after IHDR (the signature is 8 bytes, IHDR 25). */
export function pngWithOrientation(png: Uint8Array, orientation: number): Uint8Array {
  const data = orientationTiff(orientation, false);
  const typed = Uint8Array.from([..."eXIf"].map((c) => c.charCodeAt(0)).concat([...data]));
  const chunk = new Uint8Array(4 + typed.length + 4);
  const view = new DataView(chunk.buffer);
  view.setUint32(0, data.length);
  chunk.set(typed, 4);
  view.setUint32(4 + typed.length, Bun.hash.crc32(typed));
  return Uint8Array.from([...png.subarray(0, 33), ...chunk, ...png.subarray(33)]);
}

/** A lossless WebP of `png`'s pixels with a RIFF EXIF chunk appended, the RIFF size mended. */
export async function webpWithOrientation(png: Uint8Array, orientation: number): Promise<Uint8Array> {
  const webp = await new Bun.Image(png).webp({ lossless: true }).bytes();
  const data = Uint8Array.from([...EXIF_PREFIX, ...orientationTiff(orientation)]);
  const chunk = new Uint8Array(8 + data.length + (data.length % 2));
  chunk.set([..."EXIF"].map((c) => c.charCodeAt(0)), 0);
  new DataView(chunk.buffer).setUint32(4, data.length, true);
  chunk.set(data, 8);
  const out = Uint8Array.from([...webp, ...chunk]);
  new DataView(out.buffer).setUint32(4, out.length - 8, true);
  return out;
}

/**
 * A TIFF file as a scanner or an old camera writes it: IFD0 with its width and height (LONG), the orientation
 * (SHORT), and one uncompressed 8-bit grey strip of the pixels (Pillow reads it; Bun.Image on Linux cannot).
 */
export function tiffImage(width: number, height: number, orientation = 1): Uint8Array<ArrayBuffer> {
  // [tag, type, value]: ImageWidth, ImageLength, BitsPerSample, Compression, Photometric, StripOffsets,
  // Orientation, SamplesPerPixel, RowsPerStrip, StripByteCounts; in tag order, as TIFF wants.
  const pixelsAt = 8 + 2 + 10 * 12 + 4;
  const entries: Array<[number, number, number]> = [
    [0x100, 4, width], [0x101, 4, height], [0x102, 3, 8], [0x103, 3, 1], [0x106, 3, 1], [0x111, 4, pixelsAt],
    [0x112, 3, orientation], [0x115, 3, 1], [0x116, 4, height], [0x117, 4, width * height],
  ];
  const tiff = new Uint8Array(pixelsAt + width * height).fill(0x80, pixelsAt);
  const view = new DataView(tiff.buffer);
  tiff.set([0x49, 0x49], 0);
  view.setUint16(2, 42, true);
  view.setUint32(4, 8, true);
  view.setUint16(8, entries.length, true);
  entries.forEach(([tag, type, value], i) => {
    const at = 10 + i * 12;
    view.setUint16(at, tag, true);
    view.setUint16(at + 2, type, true);
    view.setUint32(at + 4, 1, true);
    if (type === 3) view.setUint16(at + 8, value, true);
    else view.setUint32(at + 8, value, true);
  });
  return tiff;
}

/** A PNG whose header claims `width` x `height` over a 1 x 1 picture's data: its size is read, never decoded. */
export function claimedPng(width: number, height: number): Uint8Array {
  const png = solidPng(1, 1, [1, 2, 3]);
  const view = new DataView(png.buffer, png.byteOffset);
  // IHDR: the signature (8), its length and type (8), then width and height; its CRC over type and data at 29.
  view.setUint32(16, width);
  view.setUint32(20, height);
  view.setUint32(29, Bun.hash.crc32(png.subarray(12, 29)));
  return png;
}

/**
 * A real GIF89a of one `frame` of black pixels at `at` on a logical screen of `screen`: the screen is what Pillow
 * sizes a GIF by, the frame what Bun.Image decodes.
 */
export function gifImage(screen: [number, number], frame: [number, number], at: [number, number] = [0, 0]): Uint8Array {
  const u16 = (n: number) => [n & 0xff, n >> 8];
  // Four colors (flags 0x81: a global table of 2^(1+1)), black first.
  const head = [..."GIF89a"].map((c) => c.charCodeAt(0));
  const screenDescriptor = [...u16(screen[0]), ...u16(screen[1]), 0x81, 0, 0, ...Array(12).fill(0)];
  const descriptor = [0x2c, ...u16(at[0]), ...u16(at[1]), ...u16(frame[0]), ...u16(frame[1]), 0];
  const data = lzwOfZeros(frame[0] * frame[1]);
  const blocks: number[] = [];
  for (let i = 0; i < data.length; i += 255) blocks.push(Math.min(255, data.length - i), ...data.slice(i, i + 255));
  return new Uint8Array([...head, ...screenDescriptor, ...descriptor, 2, ...blocks, 0, 0x3b]);
}

// LZW of `n` pixels of color 0 at minimum code size 2, in 3-bit codes: a clear code (4) before every two pixels
// keeps the table below 8 entries, so the code width never grows; then the end code (5). Packed low bit first.
function lzwOfZeros(n: number): number[] {
  const codes: number[] = [];
  for (let left = n; left > 0; left -= 2) codes.push(4, ...(left >= 2 ? [0, 0] : [0]));
  codes.push(5);
  const bytes: number[] = [];
  let [bits, filled] = [0, 0];
  for (const code of codes) {
    bits |= code << filled;
    filled += 3;
    while (filled >= 8) {
      bytes.push(bits & 0xff);
      bits >>= 8;
      filled -= 8;
    }
  }
  if (filled > 0) bytes.push(bits & 0xff);
  return bytes;
}
