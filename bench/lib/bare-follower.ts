// A baseline for the supervisor's CPU: the least a Bun process can do to follow a growing log, namely fs.watch
// (inotify) and a read of what was appended, with no parsing and no bookkeeping. argv[2] is the file.
import { openSync, readSync, watch } from "node:fs";

const path = process.argv[2] ?? "";
const fd = openSync(path, "r");
const buf = Buffer.alloc(64 * 1024);
let offset = 0;
const drain = () => {
  for (let n = readSync(fd, buf, 0, buf.length, offset); n > 0; n = readSync(fd, buf, 0, buf.length, offset)) offset += n;
};
drain();
watch(path, drain);
