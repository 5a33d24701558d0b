// Finds the float tensors of a safetensors file that hold a NaN or ±Inf, fed the file chunk by chunk in
// order. IEEE floats are non-finite exactly when every exponent bit is set; safetensors stores them
// little-endian, so the exponent sits in an element's last two bytes. Only F16, BF16, F32 and F64 are
// scanned: integer and F8 tensors are skipped (sd-scripts saves a LoRA as F16, BF16 or F32).
import type { TensorEntry } from "./header.ts";

export interface NonFinite {
  tensors: number;
  names: string[];
}

interface FloatLayout {
  bytes: number;
  // The exponent's bits in the element's most and second most significant byte.
  hi: number;
  lo: number;
  // The exponent's bits in an aligned 32-bit word (two lanes for 16-bit floats), its lowest bit, and which
  // 32-bit words of the element hold it (F64: every second one, from the second).
  wordMask: number;
  wordLowBit: number;
  firstWord: number;
  wordStride: number;
}

const FLOATS: Readonly<Record<string, FloatLayout>> = {
  F16: { bytes: 2, hi: 0x7c, lo: 0x00, wordMask: 0x7c007c00, wordLowBit: 0x04000400, firstWord: 0, wordStride: 1 },
  BF16: { bytes: 2, hi: 0x7f, lo: 0x80, wordMask: 0x7f807f80, wordLowBit: 0x00800080, firstWord: 0, wordStride: 1 },
  F32: { bytes: 4, hi: 0x7f, lo: 0x80, wordMask: 0x7f800000, wordLowBit: 0x00800000, firstWord: 0, wordStride: 1 },
  F64: { bytes: 8, hi: 0x7f, lo: 0xf0, wordMask: 0x7ff00000, wordLowBit: 0x00100000, firstWord: 1, wordStride: 2 },
};

// How many bad tensors the verdict names; the count covers them all.
const NAMES_SHOWN = 5;
// Chunks at multiples of this file offset never split an aligned element (the widest is 8 bytes).
const WORD_SAFE_ALIGNMENT = 8;

interface Target {
  name: string;
  layout: FloatLayout;
  start: number;
  end: number;
  bad: boolean;
}

export interface NonFiniteScan {
  update(chunk: Uint8Array, position: number): void;
  result(): NonFinite;
}

export function scanNonFinite(tensors: readonly TensorEntry[], dataStart: number): NonFiniteScan {
  const targets = floatTargets(tensors, dataStart);
  let next = 0;
  let previousByte = 0;
  return {
    update(chunk, position) {
      const end = position + chunk.byteLength;
      for (let index = next; index < targets.length && targets[index]!.start < end; index++) {
        const target = targets[index]!;
        if (!target.bad && target.end > position) target.bad = scanChunk(target, chunk, position, previousByte);
      }
      while (next < targets.length && targets[next]!.end <= end) next++;
      if (chunk.byteLength > 0) previousByte = chunk[chunk.byteLength - 1]!;
    },
    result() {
      const bad = targets.filter((target) => target.bad).map((target) => target.name);
      return { tensors: bad.length, names: bad.slice(0, NAMES_SHOWN) };
    },
  };
}

function floatTargets(tensors: readonly TensorEntry[], dataStart: number): Target[] {
  return tensors
    .flatMap((tensor) => {
      const layout = FLOATS[tensor.dtype];
      if (layout === undefined || tensor.end === tensor.begin) return [];
      return [{ name: tensor.name, layout, start: dataStart + tensor.begin, end: dataStart + tensor.end, bad: false }];
    })
    .toSorted((a, b) => a.start - b.start);
}

// True when an element of `target` whose top byte lies in this chunk is non-finite.
function scanChunk(target: Target, chunk: Uint8Array, position: number, previousByte: number): boolean {
  const from = Math.max(target.start, position);
  const to = Math.min(target.end, position + chunk.byteLength);
  const aligned =
    target.start % target.layout.bytes === 0 && position % WORD_SAFE_ALIGNMENT === 0 && chunk.byteOffset % 4 === 0;
  if (!aligned) return scanBytes(target, chunk, position, previousByte, from, to);
  // 16-bit floats may begin or end half way through a word: those edge elements go byte by byte.
  const wordFrom = roundUp(from, 4);
  const wordTo = to - (to % 4);
  if (wordFrom >= wordTo) return scanBytes(target, chunk, position, previousByte, from, to);
  return (
    scanBytes(target, chunk, position, previousByte, from, wordFrom) ||
    scanBytes(target, chunk, position, previousByte, wordTo, to) ||
    scanWords(target.layout, chunk, (wordFrom - position) / 4, (wordTo - position) / 4)
  );
}

// Branch-free over the bulk: (exponent bits + their lowest bit) carries into the bit above exactly when all
// are set. Shifted right by one first so the sum stays a positive int32 (the sign bit is never part of the mask).
// Int32Array reads in host byte order: little-endian, like the file, on the x86-64 and arm64 hosts this serves.
function scanWords(layout: FloatLayout, chunk: Uint8Array, fromWord: number, toWord: number): boolean {
  const words = new Int32Array(chunk.buffer, chunk.byteOffset, chunk.byteLength >>> 2);
  const mask = layout.wordMask >>> 1;
  const lowBit = layout.wordLowBit >>> 1;
  const carry = (mask + lowBit) & ~mask;
  const stride = layout.wordStride;
  let sums = 0;
  for (let word = fromWord + layout.firstWord; word < toWord; word += stride) {
    sums |= ((words[word]! >>> 1) & mask) + lowBit;
  }
  return (sums & carry) !== 0;
}

// Elements whose most significant byte lies in [from, to); the byte below it may be the previous chunk's last.
function scanBytes(
  target: Target,
  chunk: Uint8Array,
  position: number,
  previousByte: number,
  from: number,
  to: number,
): boolean {
  const { bytes, hi, lo } = target.layout;
  const firstTop = target.start + bytes - 1;
  let top = firstTop >= from ? firstTop : firstTop + Math.ceil((from - firstTop) / bytes) * bytes;
  for (; top < to; top += bytes) {
    const below = top - 1 >= position ? chunk[top - 1 - position]! : previousByte;
    if ((chunk[top - position]! & hi) === hi && (below & lo) === lo) return true;
  }
  return false;
}

function roundUp(value: number, multiple: number): number {
  return Math.ceil(value / multiple) * multiple;
}
