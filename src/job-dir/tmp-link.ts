// The trainer's TMPDIR, an OS contract. Python's multiprocessing (torch's data-loader worker, accelerate) binds
// AF_UNIX sockets at $TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX, 32 bytes past TMPDIR, and a socket path holds at
// most 107 bytes (sun_path is 108 with its NUL): the job's own tmp folder, <state_dir>/jobs/<id>/tmp, is too long
// as soon as state_dir passes 29 characters, and the trainer hangs on "AF_UNIX path too long". So TMPDIR is a short
// symbolic link to that folder: the kernel follows it on bind() and connect() (the limit is on the string bound),
// and Python's tempfile takes TMPDIR as it is (abspath, no realpath). The files stay in the job's folder, removed
// with it. The link lives in /dev/shm because nothing else fits every run: /tmp is the unit's PrivateTmp, deleted
// when the worker stops while its run goes on; a path under state_dir grows with it; /dev/shm is on every Linux
// host and Slurm node, outside PrivateTmp, kept across the worker's restarts, emptied at boot (when no run is left),
// and torch's data loader needs it already. It is shared and sticky: a name someone else made first is refused,
// never used, and nobody else can remove or replace ours.
import { lstatSync, readdirSync, readlinkSync, symlinkSync, unlinkSync } from "node:fs";
import { basename, join } from "node:path";

// Every job's link is named this and its id.
const LINK_PREFIX = "lora-worker-";

/** Where each job's TMPDIR link lives. */
export const TMP_LINK_ROOT = "/dev/shm";
/** The most bytes an AF_UNIX socket path holds (Linux's sun_path, less its NUL). */
export const MAX_SOCKET_PATH = 107;
/** What Python's multiprocessing puts after TMPDIR for a socket: `/pymp-XXXXXXXX/listener-XXXXXXXX`. */
export const PYMP_SOCKET_SUFFIX = 32;

/** The job's own temporary folder, in its directory. */
export const tmpFolder = (jobDir: string) => join(jobDir, "tmp");

/** The trainer's TMPDIR: a short link to the job's tmp folder, named by the job's id (its directory's name). */
export const tmpLink = (jobDir: string) => join(TMP_LINK_ROOT, `${LINK_PREFIX}${basename(jobDir)}`);

/** The link to the job's tmp folder, made where the trainer runs (by the shim); one already there must be ours. */
export function linkTmp(jobDir: string): void {
  const [link, target] = [tmpLink(jobDir), tmpFolder(jobDir)];
  try {
    symlinkSync(target, link);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST" && isOurs(link, target)) return;
    throw new Error(`cannot make the trainer's TMPDIR ${link} (a link to ${target}): ${(err as Error).message}`);
  }
}

/** Removes the job's link if it is ours; anything else at that name is left alone. */
export function unlinkTmp(jobDir: string): void {
  const [link, target] = [tmpLink(jobDir), tmpFolder(jobDir)];
  try {
    if (isOurs(link, target)) unlinkSync(link);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

/**
 * The jobs of `jobsRoot` (one state dir's jobs folder) whose TMPDIR links are in this host's /dev/shm: this user's
 * links, each named for a job and leading into that job's own tmp folder there. Another worker's, even of the same
 * user, leads into its own state dir and is never among them.
 */
export function jobsWithTmpLinks(jobsRoot: string): string[] {
  let names: string[];
  try {
    names = readdirSync(TMP_LINK_ROOT);
  } catch {
    return [];
  }
  return names.flatMap((name) => {
    const id = name.slice(LINK_PREFIX.length);
    const dir = join(jobsRoot, id);
    // The name must be the one tmpLink gives that job's directory ("lora-worker-.." names none).
    const named = name.startsWith(LINK_PREFIX) && tmpLink(dir) === join(TMP_LINK_ROOT, name);
    return named && isOurs(tmpLink(dir), tmpFolder(dir)) ? [id] : [];
  });
}

// A link this user made to this job's folder; another user's name in the sticky /dev/shm is never ours.
function isOurs(link: string, target: string): boolean {
  try {
    const st = lstatSync(link);
    return st.isSymbolicLink() && st.uid === process.getuid?.() && readlinkSync(link) === target;
  } catch {
    return false;
  }
}
