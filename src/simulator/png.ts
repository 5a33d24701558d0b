// A PNG file as the PNG spec frames it: the 8-byte signature, then chunks, each its big-endian data
// length, 4-byte type, data and the CRC-32 of type and data: IHDR, one IDAT of zlib data, IEND.
import { deflateSync } from "node:zlib";

const SIGNATURE = Uint8Array.of(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a);
const BIT_DEPTH = 8;
const COLOR_TYPE_RGB = 2;
export const RGB_BYTES = 3;

// `scanlines` holds each row as its filter byte then width × RGB; compression, filter and interlace are 0.
export function encodePng(width: number, height: number, scanlines: Uint8Array): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([BIT_DEPTH, COLOR_TYPE_RGB], 8);
  const chunks = [chunk("IHDR", header), chunk("IDAT", deflateSync(scanlines)), chunk("IEND", new Uint8Array(0))];
  return Buffer.concat([SIGNATURE, ...chunks]);
}

function chunk(type: string, data: Uint8Array): Buffer {
  const framed = Buffer.alloc(data.length + 12);
  framed.writeUInt32BE(data.length, 0);
  framed.write(type, 4, "latin1");
  framed.set(data, 8);
  framed.writeUInt32BE(Bun.hash.crc32(framed.subarray(4, data.length + 8)), data.length + 8);
  return framed;
}
