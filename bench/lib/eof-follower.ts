// The log follower as it was before issue 11 item 6, kept as the contrast for bench/follower-starvation.ts: on each
// inotify wake-up (batched 25 ms) it reads to EOF in one synchronous loop, whatever the backlog.
import { closeSync, fstatSync, openSync, readSync, watch } from "node:fs";

export function followToEof(path: string, onText: (text: string) => void): { drain(): void; stop(): void } {
  const fd = openSync(path, "r");
  const decoder = new TextDecoder("utf-8");
  const buf = Buffer.alloc(64 * 1024);
  let offset = 0;
  let pending: Timer | null = null;
  const drain = () => {
    pending = null;
    offset = Math.min(offset, fstatSync(fd).size);
    for (let n = readSync(fd, buf, 0, buf.length, offset); n > 0; n = readSync(fd, buf, 0, buf.length, offset)) {
      offset += n;
      onText(decoder.decode(buf.subarray(0, n), { stream: true }));
    }
  };
  const watcher = watch(path, () => (pending ??= setTimeout(drain, 25)));
  return {
    drain,
    stop() {
      if (pending) clearTimeout(pending);
      watcher.close();
      closeSync(fd);
    },
  };
}
