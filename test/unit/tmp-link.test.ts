import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, symlinkSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jobDir, jobsDir } from "../../src/job-dir/job-dir.ts";
import {
  jobsWithTmpLinks, linkTmp, MAX_SOCKET_PATH, PYMP_SOCKET_SUFFIX, tmpLink, unlinkTmp,
} from "../../src/job-dir/tmp-link.ts";

const root = mkdtempSync(join(tmpdir(), "tmp-link-test-"));
const stateDir = join(root, "x".repeat(200));
afterAll(() => rmSync(root, { recursive: true, force: true }));

// A job directory as dispatch fills it, under a fresh id.
function preparedJob() {
  const dir = jobDir(stateDir, crypto.randomUUID());
  dir.create();
  dir.writeRecipe({ datasetToml: "" });
  return dir;
}

describe("the trainer's TMPDIR link", () => {
  test("the jobs whose links a state dir made are told from another state dir's and from names of no job", () => {
    const [ours, theirs] = [preparedJob(), jobDir(join(root, "other-state"), crypto.randomUUID())];
    linkTmp(ours.dir);
    linkTmp(theirs.dir);
    // Same form, but "lora-worker-.." names no job directory (its target is the jobs folder's parent's tmp).
    const odd = join("/dev/shm", "lora-worker-..");
    symlinkSync(join(jobsDir(stateDir), "..", "tmp"), odd);
    try {
      const found = jobsWithTmpLinks(jobsDir(stateDir));
      expect(found).toContain(ours.id);
      expect(found).not.toContain(theirs.id);
      expect(found).not.toContain("..");
      // Contrast: from the other state dir, its own link is found and ours is not.
      expect(jobsWithTmpLinks(jobsDir(join(root, "other-state")))).toEqual(expect.arrayContaining([theirs.id]));
      expect(jobsWithTmpLinks(jobsDir(join(root, "other-state")))).not.toContain(ours.id);
    } finally {
      for (const link of [odd, ours.tmp, theirs.tmp]) rmSync(link, { force: true });
    }
  });

  test("is short enough for Python's sockets whatever the state dir, and leads to the job's own tmp folder", () => {
    const dir = preparedJob();
    expect(dir.tmp).toBe(`/dev/shm/lora-worker-${dir.id}`);
    expect(dir.tmp.length + PYMP_SOCKET_SUFFIX).toBeLessThanOrEqual(MAX_SOCKET_PATH);
    // The contrast: the folder itself, under this state dir, is far past the limit.
    expect(join(dir.dir, "tmp").length + PYMP_SOCKET_SUFFIX).toBeGreaterThan(MAX_SOCKET_PATH);
    linkTmp(dir.dir);
    expect(readlinkSync(dir.tmp)).toBe(join(dir.dir, "tmp"));
    linkTmp(dir.dir); // made again (the same link): nothing changes
    dir.removeNow();
    expect(existsSync(dir.tmp)).toBe(false);
  });

  test("a name already taken by another link is refused, never used, and left to its owner", () => {
    const dir = preparedJob();
    const elsewhere = join(root, "elsewhere");
    mkdirSync(elsewhere, { recursive: true });
    symlinkSync(elsewhere, tmpLink(dir.dir));
    try {
      expect(() => linkTmp(dir.dir)).toThrow(`cannot make the trainer's TMPDIR ${dir.tmp} (a link to ${join(dir.dir, "tmp")})`);
      unlinkTmp(dir.dir);
      expect(readlinkSync(dir.tmp)).toBe(elsewhere);
    } finally {
      unlinkSync(dir.tmp);
    }
  });

  test("removing a job directory removes its link, off the event loop too", async () => {
    const dir = preparedJob();
    linkTmp(dir.dir);
    expect(lstatSync(dir.tmp).isSymbolicLink()).toBe(true);
    await dir.remove();
    expect(existsSync(dir.tmp)).toBe(false);
    expect(existsSync(dir.dir)).toBe(false);
  });
});
