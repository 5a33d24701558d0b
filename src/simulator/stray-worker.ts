// A process the trainer leaves behind, like a dataloader worker that outlives it: a shell that
// sleeps forever. It gets no stdio, so it holds no fd of the job log, and the trainer's environment
// unchanged, so the worker can still find it by its job marker after it setsid()s out of the group.

export interface Stray {
  // setsid(): a new session and process group, out of reach of a signal to the trainer's group.
  escapeGroup: boolean;
  // Ignored signals survive exec, so the shell and every sleep it runs ignore them too.
  ignoreSigterm: boolean;
}

const SLEEP_FOREVER = "while :; do sleep 1; done";
const IGNORE_TERMINATION = 'trap "" TERM INT; ';

export function spawnStray(env: Record<string, string | undefined>, { escapeGroup, ignoreSigterm }: Stray): void {
  const script = `${ignoreSigterm ? IGNORE_TERMINATION : ""}${SLEEP_FOREVER}`;
  const stray = Bun.spawn(["/bin/sh", "-c", script], { env, stdio: ["ignore", "ignore", "ignore"], detached: escapeGroup });
  // The trainer never waits for it: it must be free to exit, or die, first.
  stray.unref();
}
