// EXIF orientation (TIFF tag 0x0112) as phone cameras write it, read from the containers the trainer reads: JPEG
// (an APP1 segment "Exif\0\0" + TIFF), PNG (an eXIf chunk of bare TIFF, before IDAT), WebP (a RIFF "EXIF" chunk,
// bare TIFF or with the JPEG prefix) and a TIFF file itself (its first IFD; Bun.Image cannot decode TIFF on Linux).
// 1 is upright; 2-8 say how the stored pixels must be turned to be seen as the camera saw them. Pillow, which
// sd-scripts loads images with, ignores the tag (sd-scripts issue #1316).
const ORIENTATION_TAG = 0x0112;
const WIDTH_TAG = 0x0100;
const HEIGHT_TAG = 0x0101;
const EXIF_PREFIX = [0x45, 0x78, 0x69, 0x66, 0, 0]; // "Exif\0\0"

/** An orientation 1-8, or 1 when the file carries none (or one no reader would trust). */
export type Orientation = 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8;

/** The transform that makes stored pixels upright: first a clockwise rotation, then a mirror left to right. */
export interface Upright {
  rotate: 0 | 90 | 180 | 270;
  mirror: boolean;
}

// Per orientation: 2 mirrored, 3 upside down, 4 mirrored upside down, 5 transposed, 6 turned left (so turned
// right to fix), 7 transversed, 8 turned right. 5 and 7 are a quarter turn and a mirror (transpose = 90° + mirror).
const UPRIGHT: Record<Orientation, Upright> = {
  1: { rotate: 0, mirror: false },
  2: { rotate: 0, mirror: true },
  3: { rotate: 180, mirror: false },
  4: { rotate: 180, mirror: true },
  5: { rotate: 90, mirror: true },
  6: { rotate: 90, mirror: false },
  7: { rotate: 270, mirror: true },
  8: { rotate: 270, mirror: false },
};

export function uprightOf(orientation: Orientation): Upright {
  return UPRIGHT[orientation];
}

export function readOrientation(bytes: Uint8Array): Orientation {
  const tiff = tiffOf(bytes);
  const value = tiff === null ? undefined : ifdValues(tiff).get(ORIENTATION_TAG);
  return value !== undefined && value >= 1 && value <= 8 ? (value as Orientation) : 1;
}

/** Whether the bytes are a TIFF file: its byte order ("II" or "MM") and 42. */
export function isTiff(bytes: Uint8Array): boolean {
  const order = ascii(bytes, 0, 2);
  if (bytes.length < 8 || (order !== "II" && order !== "MM")) return false;
  return viewOf(bytes).getUint16(2, order === "II") === 42;
}

/** A TIFF file's width and height as its first IFD gives them, read without decoding; null when it gives none. */
export function tiffSize(bytes: Uint8Array): { width: number; height: number } | null {
  const values = ifdValues(bytes);
  const [width, height] = [values.get(WIDTH_TAG), values.get(HEIGHT_TAG)];
  return width === undefined || height === undefined || width < 1 || height < 1 ? null : { width, height };
}

function tiffOf(bytes: Uint8Array): Uint8Array | null {
  if (isTiff(bytes)) return bytes;
  if (bytes[0] === 0xff && bytes[1] === 0xd8) return jpegTiff(bytes);
  if (bytes[0] === 0x89 && ascii(bytes, 1, 3) === "PNG") return pngTiff(bytes);
  if (ascii(bytes, 0, 4) === "RIFF" && ascii(bytes, 8, 4) === "WEBP") return webpTiff(bytes);
  return null;
}

// Markers up to the first scan; each segment is FF, its marker, then a big-endian length that counts itself.
function jpegTiff(bytes: Uint8Array): Uint8Array | null {
  let at = 2;
  while (at + 4 <= bytes.length && bytes[at] === 0xff) {
    const marker = bytes[at + 1]!;
    if (marker === 0xda || marker === 0xd9) return null;
    const length = (bytes[at + 2]! << 8) | bytes[at + 3]!;
    const body = bytes.subarray(at + 4, at + 2 + length);
    if (marker === 0xe1 && startsWith(body, EXIF_PREFIX)) return body.subarray(EXIF_PREFIX.length);
    at += 2 + length;
  }
  return null;
}

// Chunks are length, type, data, CRC; the eXIf chunk must come before the image data.
function pngTiff(bytes: Uint8Array): Uint8Array | null {
  const view = viewOf(bytes);
  let at = 8;
  while (at + 8 <= bytes.length) {
    const length = view.getUint32(at);
    const type = ascii(bytes, at + 4, 4);
    if (type === "eXIf") return bytes.subarray(at + 8, at + 8 + length);
    if (type === "IDAT" || type === "IEND") return null;
    at += 12 + length;
  }
  return null;
}

// RIFF chunks are a FourCC, a little-endian length, the data, padded to an even length.
function webpTiff(bytes: Uint8Array): Uint8Array | null {
  const view = viewOf(bytes);
  let at = 12;
  while (at + 8 <= bytes.length) {
    const length = view.getUint32(at + 4, true);
    if (ascii(bytes, at, 4) === "EXIF") {
      const body = bytes.subarray(at + 8, at + 8 + length);
      return startsWith(body, EXIF_PREFIX) ? body.subarray(EXIF_PREFIX.length) : body;
    }
    at += 8 + length + (length % 2);
  }
  return null;
}

// The TIFF header ("II" or "MM", 42, the first IFD's offset) and IFD0's 12-byte entries: tag, type, count, value.
// Each tag of one value, a SHORT (type 3) or LONG (type 4), held in the entry itself; nothing a reader would not
// trust (a header cut short, an entry past the end) is read.
function ifdValues(tiff: Uint8Array): Map<number, number> {
  const values = new Map<number, number>();
  if (!isTiff(tiff)) return values;
  const little = ascii(tiff, 0, 2) === "II";
  const view = viewOf(tiff);
  const ifd = view.getUint32(4, little);
  if (ifd + 2 > tiff.length) return values;
  const entries = view.getUint16(ifd, little);
  for (let i = 0; i < entries; i++) {
    const at = ifd + 2 + i * 12;
    if (at + 12 > tiff.length) break;
    const [tag, type] = [view.getUint16(at, little), view.getUint16(at + 2, little)];
    if (view.getUint32(at + 4, little) !== 1) continue;
    if (type === 3) values.set(tag, view.getUint16(at + 8, little));
    if (type === 4) values.set(tag, view.getUint32(at + 8, little));
  }
  return values;
}

function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function ascii(bytes: Uint8Array, at: number, length: number): string {
  return String.fromCharCode(...bytes.subarray(at, at + length));
}

function startsWith(bytes: Uint8Array, prefix: number[]): boolean {
  return prefix.every((b, i) => bytes[i] === b);
}
