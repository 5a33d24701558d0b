import { closeSync, ftruncateSync, fstatSync, openSync, readSync, writeSync } from "node:fs";

// The trainer appends to its log with O_APPEND, so the log can be cut under it: its next write
// still lands at the new end. A cut keeps the first and the last quarter of the cap.
export function capLog(path: string, maxBytes: number): number {
  const fd = openSync(path, "r+");
  try {
    const size = fstatSync(fd).size;
    if (size <= maxBytes) return 0;
    const keep = Math.floor(maxBytes / 4);
    const tail = Buffer.alloc(keep);
    const got = readSync(fd, tail, 0, keep, size - keep);
    const dropped = size - 2 * keep;
    const marker = Buffer.from(`\n[lora-worker: ${dropped} bytes of trainer output dropped here to keep this log under ${maxBytes} bytes]\n`);
    const rest = Buffer.concat([marker, tail.subarray(0, got)]);
    ftruncateSync(fd, keep);
    writeSync(fd, rest, 0, rest.length, keep);
    return dropped;
  } finally {
    closeSync(fd);
  }
}
