// The smallest PNG a decoder accepts: the signature, IHDR (8-bit RGB, no interlace), one IDAT of the zlib-deflated
// scanlines, each led by filter byte 0, and IEND. Every chunk is length, type, data, then the CRC-32 of type + data.
import { deflateSync } from "node:zlib";

/** Every PNG file's first eight bytes. */
export const PNG_SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
const RGB = 2;
const BIT_DEPTH = 8;

/** `pixel(x, y)` gives [r, g, b], 0–255 each. */
export function encodePng(width: number, height: number, pixel: (x: number, y: number) => number[]): Uint8Array {
  const rowBytes = 1 + width * 3;
  const raw = new Uint8Array(rowBytes * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) raw.set(pixel(x, y), y * rowBytes + 1 + x * 3);
  }
  return pngOf(width, height, raw);
}

/** One colour throughout: the scanlines are built whole, not pixel by pixel. */
export function solidPng(width: number, height: number, rgb: number[]): Uint8Array {
  const row = Uint8Array.from([0, ...Array.from({ length: width }, () => rgb).flat()]);
  const raw = new Uint8Array(row.length * height);
  for (let y = 0; y < height; y++) raw.set(row, y * row.length);
  return pngOf(width, height, raw);
}

// `raw`: the scanlines, each led by its filter byte.
function pngOf(width: number, height: number, raw: Uint8Array): Uint8Array {
  const header = new Uint8Array(13);
  const view = new DataView(header.buffer);
  view.setUint32(0, width);
  view.setUint32(4, height);
  header.set([BIT_DEPTH, RGB, 0, 0, 0], 8);
  return concat([
    PNG_SIGNATURE,
    chunk("IHDR", header),
    chunk("IDAT", deflateSync(raw)),
    chunk("IEND", new Uint8Array(0)),
  ]);
}

function chunk(type: string, data: Uint8Array): Uint8Array {
  const out = new Uint8Array(12 + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, data.length);
  out.set(new TextEncoder().encode(type), 4);
  out.set(data, 8);
  view.setUint32(8 + data.length, Bun.hash.crc32(out.subarray(4, 8 + data.length)));
  return out;
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
