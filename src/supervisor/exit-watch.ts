import { watch } from "node:fs";
import { readExit, type ExitFile } from "./job-files.ts";

// A backstop for filesystems where inotify is silent, and the pace of the "is the shim alive" check.
const POLL_MS = 500;

export type ExitWatch = ExitFile | { lost: true };

// Resolves when the shim records the trainer's end, or when the shim is gone without a word
// (killed with -9, say): then the exit status is lost and the caller must say so. Throws at once,
// not later, when the watch cannot be set up (no inotify instance or descriptor left).
export function watchExit(jobDir: string, shimAlive: () => boolean, shimExited?: Promise<unknown>): Promise<ExitWatch> {
  let resolve: (value: ExitWatch) => void = () => {};
  const result = new Promise<ExitWatch>((r) => (resolve = r));
  let done = false;
  const check = (allowLost: boolean) => {
    if (done) return;
    const exit = readExit(jobDir);
    if (exit) return finish(exit);
    if (allowLost && !shimAlive()) finish({ lost: true });
  };
  const finish = (value: ExitWatch) => {
    done = true;
    watcher.close();
    clearInterval(poll);
    resolve(value);
  };
  const watcher = watch(jobDir, (_event, name) => {
    if (name === "exit.json") check(false);
  });
  const poll = setInterval(() => check(true), POLL_MS);
  void shimExited?.then(() => check(true));
  check(false);
  return result;
}
