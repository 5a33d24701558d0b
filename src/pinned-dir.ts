import { constants } from "node:fs";
import { type FileHandle, lstat, mkdir, open } from "node:fs/promises";
import { fileKind } from "./fs.ts";

// Paths in a folder another program writes (arbo's handoff root), opened so that nothing it lays there can lead
// the worker elsewhere or hang it. Node and Bun have no openat(); a directory held open stands in for it. The
// kernel resolves /proc/self/fd/<fd> to the very directory the descriptor holds, not to the path it was opened
// by, so `/proc/self/fd/<fd>/<name>` looks `name` up in that directory whatever was renamed or linked above it
// since: what openat(fd, name) does. Each name is opened with O_NOFOLLOW (a link there is refused, not followed)
// and O_NONBLOCK (a FIFO opens at once rather than waiting for a writer), then fstat'ed, so what is used is
// what was opened. A chain opened name by name from a root thus only ever passes through real directories.

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const NO_FOLLOW_NO_WAIT = constants.O_NOFOLLOW | constants.O_NONBLOCK;
// What open() says when the name is not the kind of file asked for (a link, a socket, a FIFO with no reader…).
const WRONG_KIND = new Set(["ELOOP", "ENOTDIR", "EISDIR", "ENXIO", "ENOENT"]);

/** A name under a pinned directory that is not what the worker expects there; `rel` is from the chain's root. */
export class NotAsExpected extends Error {
  constructor(readonly rel: string, readonly found: string) {
    super(`${rel} is ${found}`);
  }
}

/** A directory held open; `rel` is where it lies under the root its chain began at ("" for the root). */
export interface PinnedDir extends AsyncDisposable {
  readonly handle: FileHandle;
  readonly rel: string;
  /** The path of `name` in this very directory, for any fs call. */
  at(name: string): string;
}

const below = (rel: string, name: string) => (rel === "" ? name : `${rel}/${name}`);

function pinned(handle: FileHandle, rel: string): PinnedDir {
  return {
    handle,
    rel,
    at: (name) => `/proc/self/fd/${handle.fd}/${name}`,
    [Symbol.asyncDispose]: () => handle.close(),
  };
}

/** Opens the root itself; its own path may pass through links (it is the operator's configured path). */
export async function pinRoot(path: string): Promise<PinnedDir> {
  return pinned(await open(path, constants.O_RDONLY | constants.O_DIRECTORY), "");
}

/**
 * Opens the directory `name` in `dir`, never through a link. With `create`, makes it first when missing
 * (`exclusive`: it must not exist yet). Throws NotAsExpected when it is a link, a file, a FIFO or missing.
 */
export async function pinChild(
  dir: PinnedDir,
  name: string,
  create?: { mode: number; exclusive?: boolean },
): Promise<PinnedDir> {
  if (create !== undefined) {
    await mkdir(dir.at(name), { mode: create.mode }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "EEXIST" || create.exclusive) throw err;
    });
  }
  const handle = await open(dir.at(name), DIR_FLAGS).catch((err) => wrongKind(dir, name, err));
  return pinned(handle, below(dir.rel, name));
}

/** Opens `names` one below the other from `root`, each with pinChild; the ones between are closed again. */
export async function pinChain(root: string, names: readonly string[], mode?: number): Promise<PinnedDir> {
  let dir = await pinRoot(root);
  for (const name of names) {
    try {
      const next = await pinChild(dir, name, mode === undefined ? undefined : { mode });
      await dir.handle.close();
      dir = next;
    } catch (err) {
      await dir.handle.close();
      throw err;
    }
  }
  return dir;
}

/**
 * Opens `name` in `dir` (`flags` as for open(); O_NOFOLLOW and O_NONBLOCK are added) and checks it is a regular
 * file: a link, a FIFO, a socket or a device throws NotAsExpected, and never blocks.
 */
export async function openFileIn(dir: PinnedDir, name: string, flags: number, mode = 0o640): Promise<FileHandle> {
  const handle = await open(dir.at(name), flags | NO_FOLLOW_NO_WAIT, mode).catch((err) => wrongKind(dir, name, err));
  const st = await handle.stat();
  if (st.isFile()) return handle;
  await handle.close();
  throw new NotAsExpected(below(dir.rel, name), fileKind(st));
}

// An open that failed on what the name is (not on a fault of the disk) is said in those words.
async function wrongKind(dir: PinnedDir, name: string, err: NodeJS.ErrnoException): Promise<never> {
  if (!WRONG_KIND.has(err.code ?? "")) throw err;
  const found = await lstat(dir.at(name)).then(fileKind, () => "missing");
  throw new NotAsExpected(below(dir.rel, name), found);
}
