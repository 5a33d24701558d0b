// A GIF's size as Pillow gives it (GifImagePlugin: the logical screen, grown to the first frame where the frame
// reaches past it), which is what sd-scripts buckets and what Pillow's decompression-bomb check weighs. Bun.Image
// gives the frame's: an 8x8 frame on a 16000x16000 screen reads 8x8 to it, and Pillow refuses the file.

/** Whether the bytes are a GIF: "GIF87a" or "GIF89a". */
export function isGif(bytes: Uint8Array): boolean {
  const head = String.fromCharCode(...bytes.subarray(0, 6));
  return head === "GIF87a" || head === "GIF89a";
}

/** Pillow's size of a GIF: its logical screen, and as far as its first frame reaches past it. */
export function gifSize(bytes: Uint8Array): { width: number; height: number } {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const screen = { width: view.getUint16(6, true), height: view.getUint16(8, true) };
  const frame = firstFrame(bytes, view, 13 + colorTable(bytes[10]!));
  if (frame === null) return screen;
  return { width: Math.max(screen.width, frame.right), height: Math.max(screen.height, frame.bottom) };
}

// A global or local color table follows its flags byte when the flags' top bit says so: 3 bytes a color.
function colorTable(flags: number): number {
  return flags & 0x80 ? 3 * 2 ** ((flags & 7) + 1) : 0;
}

// The first image descriptor (","), past the extensions ("!", label, sub-blocks to a zero length) before it.
function firstFrame(bytes: Uint8Array, view: DataView, at: number): { right: number; bottom: number } | null {
  while (at < bytes.length) {
    const block = bytes[at];
    if (block === 0x2c && at + 9 < bytes.length) {
      const [left, top] = [view.getUint16(at + 1, true), view.getUint16(at + 3, true)];
      return { right: left + view.getUint16(at + 5, true), bottom: top + view.getUint16(at + 7, true) };
    }
    if (block !== 0x21) return null;
    at += 2;
    while (at < bytes.length && bytes[at] !== 0) at += bytes[at]! + 1;
    at += 1;
  }
  return null;
}
