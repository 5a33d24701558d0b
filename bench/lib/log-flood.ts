// A trainer with no pacing of its own: writes sd-scripts' `steps:` redraws to a file at RATE MiB/s (faster than the
// supervisor parses them) for SECONDS, cutting the file back to empty at CAP bytes as the shim's log cap would; then
// prints the bytes written as one JSON line. It stops by itself: a parent it starves may not get to signal it.
//   argv: FILE RATE_MIB_PER_S SECONDS CAP_BYTES
import { closeSync, ftruncateSync, openSync, writeSync } from "node:fs";
import { tqdmLine } from "./tqdm-trainer.ts";

const TICK_MS = 10;
const BLOCK_BYTES = 1 << 20;

function redrawBlock(): Buffer {
  let text = "";
  for (let n = 1; text.length < BLOCK_BYTES; n++) text += tqdmLine(n, 1_000_000, n / 4, 0.25);
  return Buffer.from(text);
}

const [path = "", rate = "0", seconds = "0", cap = "0"] = process.argv.slice(2);
const fd = openSync(path, "a");
const block = redrawBlock();
const start = performance.now();
let written = 0;
let size = 0;
while (performance.now() - start < Number(seconds) * 1000) {
  const due = ((performance.now() - start) / 1000) * Number(rate) * 2 ** 20;
  while (written < due) {
    if (size >= Number(cap)) (ftruncateSync(fd, 0), (size = 0));
    const n = writeSync(fd, block, 0, Math.min(block.length, Math.ceil(due - written)));
    size += n;
    written += n;
  }
  await Bun.sleep(TICK_MS);
}
closeSync(fd);
console.log(JSON.stringify({ written, seconds: (performance.now() - start) / 1000 }));
