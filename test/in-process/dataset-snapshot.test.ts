import { describe, expect, test } from "bun:test";
import { mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DatasetChanged, snapshotDataset } from "../../src/dispatch/dataset-copy.ts";
import { MAX_CAPTION_BYTES, scanDataset } from "../../src/request/dataset.ts";
import { verifySafetensors } from "../../src/safetensors/verify.ts";
import { makeHostTree, type HostTree } from "../support/host-tree.ts";
import { snapshotFiles } from "../support/leftovers.ts";
import { waitFor, within } from "../support/wait.ts";
import { dispatchOk, SIMULATOR, simulateModeConfig, supervisorFor } from "../support/real-mode.ts";

// A dataset arbo might hand over: two images with captions, one without.
function captioned(tree: HostTree): void {
  writeFileSync(join(tree.dataset, "img0.txt"), "ohwx, blue shirt");
  writeFileSync(join(tree.dataset, "img1.txt"), "ohwx, smiling");
}

const imageBytes = (tree: HostTree) =>
  [0, 1, 2].reduce((sum, i) => sum + statSync(join(tree.dataset, `img${i}.png`)).size, 0);

function harness(tree: HostTree, dataset: Record<string, number> = {}) {
  const config = simulateModeConfig(tree, { seconds_per_step: 0 });
  return supervisorFor(tree, { ...config, dataset: { ...config.dataset, ...dataset } }, SIMULATOR);
}

async function refusal(tree: HostTree, dataset: Record<string, number> = {}) {
  await using s = harness(tree, dataset);
  const result = await s.dispatcher.dispatch(tree.validRequest());
  if (result.ok || result.error.kind !== "invalid") throw new Error(`expected a 422, got ${JSON.stringify(result)}`);
  expect(s.store.list(null, 10, null)).toEqual([]);
  expect(readdirSync(tree.state).filter((name) => name !== "jobs.db" && !name.startsWith("jobs.db-"))).toEqual([]);
  return result.error.detail;
}

async function trained(s: ReturnType<typeof harness>, tree: HostTree, overrides: Record<string, unknown> = {}) {
  const job = await dispatchOk(s, tree.validRequest(overrides));
  await s.supervisor.untilIdle();
  return s.store.get(job.id)!;
}

async function tagsIn(loraPath: string): Promise<Record<string, Record<string, number>>> {
  const verdict = await verifySafetensors(loraPath);
  if (!verdict.ok) throw new Error(verdict.error.detail);
  return JSON.parse(verdict.value.metadata.ss_tag_frequency!);
}

describe("every file the trainer would read is checked at dispatch", () => {
  const refused: Array<[string, (t: HostTree) => void, string, string, Record<string, number>?]> = [
    ["a caption linked to a file outside the handoff root", (t) => symlinkSync("/etc/hostname", join(t.dataset, "img0.txt")), "img0.txt leads out of the handoff root through a symbolic link", "dataset_file_outside_root"],
    ["an image linked to a file outside the handoff root", (t) => (writeFileSync(join(t.root, "outside.png"), "x"), rmSync(join(t.dataset, "img1.png")), symlinkSync(join(t.root, "outside.png"), join(t.dataset, "img1.png"))), "img1.png leads out of the handoff root through a symbolic link", "dataset_file_outside_root"],
    ["a FIFO named like an image", (t) => Bun.spawnSync(["mkfifo", join(t.dataset, "img9.png")]), "img9.png is a FIFO, not a regular file", "dataset_file_not_regular"],
    ["a dangling caption link", (t) => symlinkSync(join(t.handoff, "gone.txt"), join(t.dataset, "img2.txt")), "img2.txt cannot be read (ENOENT)", "dataset_file_unreadable"],
    ["more files than dataset.max_files", () => {}, "holds 3 images and captions; dataset.max_files allows 2", "dataset_too_many_files", { max_files: 2 }],
    ["a file over dataset.max_file_bytes", (t) => writeFileSync(join(t.dataset, "img0.png"), "x".repeat(2048)), "img0.png is 2048 bytes; dataset.max_file_bytes allows 1024", "dataset_file_too_large", { max_file_bytes: 1024 }],
    ["a caption over the caption bound", (t) => writeFileSync(join(t.dataset, "img0.txt"), "ohwx\n".repeat(MAX_CAPTION_BYTES / 4)), `img0.txt is ${5 * (MAX_CAPTION_BYTES / 4)} bytes; a caption may hold at most ${MAX_CAPTION_BYTES} (the trainer reads one line)`, "dataset_file_too_large", { max_file_bytes: 4 * MAX_CAPTION_BYTES }],
  ];
  for (const [name, arrange, msg, type, bounds] of refused) {
    test(`${name} is a 422 naming the file, and nothing is created`, async () => {
      using tree = makeHostTree();
      arrange(tree);
      const detail = await refusal(tree, bounds);
      expect(detail).toEqual([{ loc: ["body", "dataset_dir"], msg: `${tree.dataset} ${msg}`, type }]);
      expect(detail[0]!.msg).not.toContain("/etc/hostname");
    });
  }

  test("contrast: a caption of the bound's size trains on its first line", async () => {
    using tree = makeHostTree();
    const first = "ohwx, red hat\n";
    writeFileSync(join(tree.dataset, "img0.txt"), first + "x".repeat(MAX_CAPTION_BYTES - first.length));
    await using s = harness(tree, { max_file_bytes: 4 * MAX_CAPTION_BYTES });
    const row = await trained(s, tree);
    expect(row.status).toBe("succeeded");
    expect(await tagsIn(row.lora_path!)).toEqual({ images: { ohwx: 1, "red hat": 1, "ohwx person": 2 } });
  });

  test("two images of one stem share its caption, as sd-scripts reads it for both, and train", async () => {
    using tree = makeHostTree();
    const png = readFileSync(join(tree.dataset, "img0.png"));
    writeFileSync(join(tree.dataset, "img0.jpg"), await new Bun.Image(png).jpeg().bytes());
    writeFileSync(join(tree.dataset, "img0.txt"), "ohwx, red hat");
    await using s = harness(tree);
    const row = await trained(s, tree);
    expect({ status: row.status, error: row.error }).toEqual({ status: "succeeded", error: null });
    expect(row.dataset_files).toBe(5);
    // Both images train on the one caption; the two images of other stems on the class tokens.
    expect(await tagsIn(row.lora_path!)).toEqual({ images: { ohwx: 2, "red hat": 2, "ohwx person": 2 } });
  });

  test("contrast: a caption linked to a file inside the handoff root trains, and its tags reach the LoRA", async () => {
    using tree = makeHostTree();
    writeFileSync(join(tree.handoff, "shared-caption.txt"), "ohwx, red hat");
    symlinkSync(join(tree.handoff, "shared-caption.txt"), join(tree.dataset, "img0.txt"));
    await using s = harness(tree);
    const row = await trained(s, tree);
    expect(row.status).toBe("succeeded");
    // The two images without a caption train on the class tokens, as sd-scripts counts them.
    expect(await tagsIn(row.lora_path!)).toEqual({ images: { ohwx: 1, "red hat": 1, "ohwx person": 2 } });
  });
});

describe("the trainer reads a private copy", () => {
  test("a caption swapped for an outside link after the copy does not reach the trainer", async () => {
    using tree = makeHostTree();
    captioned(tree);
    const secret = join(tree.root, "secret.txt");
    writeFileSync(secret, "SECRET-TOKEN");
    await using s = harness(tree);
    const job = await dispatchOk(s, tree.validRequest());
    rmSync(join(tree.dataset, "img0.txt"));
    symlinkSync(secret, join(tree.dataset, "img0.txt"));
    await s.supervisor.untilIdle();
    const row = s.store.get(job.id)!;

    const toml = Bun.TOML.parse(readFileSync(join(tree.state, "jobs", job.id, "dataset.toml"), "utf8")) as any;
    expect(toml.datasets[0].subsets[0].image_dir).toBe(join(tree.state, "jobs", job.id, "dataset", "images"));
    // The checked bytes, and only those, were trained on: the captions' tags are in the LoRA, the secret is not.
    expect(await tagsIn(row.lora_path!)).toEqual({ images: { ohwx: 2, "blue shirt": 1, smiling: 1, "ohwx person": 1 } });
  });

  test("arbo's dataset folder holds exactly what it held before the run; the latent caches land in the job directory", async () => {
    using tree = makeHostTree();
    captioned(tree);
    const before = snapshotFiles(tree);
    await using s = harness(tree);
    const row = await trained(s, tree);

    expect(row.status).toBe("succeeded");
    const after = snapshotFiles(tree).filter((f) => !f.startsWith("handoff/job1/out"));
    expect(after).toEqual(before);
    // Contrast: the run did cache latents to disk, beside the copy.
    const copy = readdirSync(join(tree.state, "jobs", row.id, "dataset", "images")).sort();
    expect(copy).toEqual(["img0.npz", "img0.png", "img0.txt", "img1.npz", "img1.png", "img1.txt", "img2.npz", "img2.png"]);
  });

  test("the record says what was copied; the same files give the same hash, a changed caption another", async () => {
    using tree = makeHostTree();
    captioned(tree);
    await using s = harness(tree);
    const first = await trained(s, tree, { output_name: "first" });
    const second = await trained(s, tree, { output_name: "second" });
    writeFileSync(join(tree.dataset, "img1.txt"), "ohwx, frowning");
    const third = await trained(s, tree, { output_name: "third" });

    expect(first).toMatchObject({ dataset_files: 5, dataset_bytes: imageBytes(tree) + 16 + 13 });
    expect(second.dataset_sha256).toBe(first.dataset_sha256!);
    expect(third.dataset_sha256).not.toBe(first.dataset_sha256!);
  });
});

describe("the copy takes only the file that was checked", () => {
  const swaps: Array<[string, (t: HostTree) => void]> = [
    ["replaced by a file of the same size", (t) => {
      const size = statSync(join(t.dataset, "img1.png")).size;
      rmSync(join(t.dataset, "img1.png"));
      writeFileSync(join(t.dataset, "img1.png"), Buffer.alloc(size, 0x50));
    }],
    ["rewritten in place", (t) => writeFileSync(join(t.dataset, "img1.png"), "PNG")],
    ["swapped for a link out of the root", (t) => (rmSync(join(t.dataset, "img1.png")), symlinkSync("/etc/hostname", join(t.dataset, "img1.png")))],
  ];
  for (const [how, swap] of swaps) {
    test(`a file ${how} after the check is refused by the copy`, async () => {
      using tree = makeHostTree();
      const bounds = { max_files: 100, max_bytes: 1 << 20, max_file_bytes: 1 << 20 };
      const scan = await scanDataset(tree.dataset, tree.handoff, bounds);
      if (!scan.ok) throw new Error(scan.error.msg);
      // ctime has the kernel clock's resolution: a rewrite within the same tick as the check would read as untouched.
      await waitFor(() => Date.now() > scan.value.files[1]!.ctimeMs + 10, "the clock to move past the checked ctime");
      swap(tree);

      const copied = snapshotDataset(scan.value, join(tree.state, "copy"));

      await expect(copied).rejects.toBeInstanceOf(DatasetChanged);
      await expect(copied).rejects.toThrow("img1.png changed after it was checked");
    });
  }

  // Issue 35 §2: what arbo lays in place of a checked image can neither hold the copy nor be blamed on the job
  // directory. (Root reads a file whatever its mode, so "made unreadable" is held in test/binary/handoff-swaps.)
  const kinds: Array<[string, (path: string) => Disposable, string]> = [
    ["a FIFO", (path) => (Bun.spawnSync(["mkfifo", path]), { [Symbol.dispose]() {} }), "a FIFO"],
    ["a socket", (path) => {
      const socket = Bun.listen({ unix: path, socket: { data() {} } });
      return { [Symbol.dispose]: () => socket.stop(true) };
    }, "a socket"],
  ];
  for (const [name, make, said] of kinds) {
    test(`an image swapped for ${name} after the check is refused at once as changed, never waited on`, async () => {
      using tree = makeHostTree();
      const bounds = { max_files: 100, max_bytes: 1 << 20, max_file_bytes: 1 << 20 };
      const scan = await scanDataset(tree.dataset, tree.handoff, bounds);
      if (!scan.ok) throw new Error(scan.error.msg);
      rmSync(join(tree.dataset, "img1.png"));
      using _swapped = make(join(tree.dataset, "img1.png"));

      const copied = await within(snapshotDataset(scan.value, join(tree.state, "copy")).catch((err) => err), 10_000);

      expect(copied).toBeInstanceOf(DatasetChanged);
      expect(copied.message).toBe(`img1.png changed after it was checked: it is ${said} now, not a regular file`);
    });
  }

  test("an image removed after the check is refused as changed: it is gone", async () => {
    using tree = makeHostTree();
    const scan = await scanDataset(tree.dataset, tree.handoff, { max_files: 100, max_bytes: 1 << 20, max_file_bytes: 1 << 20 });
    if (!scan.ok) throw new Error(scan.error.msg);
    rmSync(join(tree.dataset, "img1.png"));

    const copied = snapshotDataset(scan.value, join(tree.state, "copy"));

    await expect(copied).rejects.toThrow(new DatasetChanged("img1.png", "it is gone"));
  });

  test("a fault of the copy itself names the file as arbo named it and its code, never a path in the state dir", async () => {
    using tree = makeHostTree();
    const scan = await scanDataset(tree.dataset, tree.handoff, { max_files: 100, max_bytes: 1 << 20, max_file_bytes: 1 << 20 });
    if (!scan.ok) throw new Error(scan.error.msg);
    const dest = join(tree.state, "copy");
    mkdirSync(join(dest, "images"), { recursive: true });
    writeFileSync(join(dest, "images", "img1.png"), "in the way");

    const copied = await snapshotDataset(scan.value, dest).catch((err) => err);

    expect({ message: copied.message, code: copied.code }).toEqual({ message: "img1.png: EEXIST (open)", code: "EEXIST" });
    // Contrast: the error the system gives for that very open names the path in the state dir.
    let raw = "";
    try {
      openSync(join(dest, "images", "img1.png"), "wx");
    } catch (err) {
      raw = (err as Error).message;
    }
    expect(raw).toContain(tree.state);
  });

  test("contrast: the untouched dataset copies whole", async () => {
    using tree = makeHostTree();
    const bounds = { max_files: 100, max_bytes: 1 << 20, max_file_bytes: 1 << 20 };
    const scan = await scanDataset(tree.dataset, tree.handoff, bounds);
    if (!scan.ok) throw new Error(scan.error.msg);
    const dest = join(tree.state, "copy");
    mkdirSync(dest);

    expect(await snapshotDataset(scan.value, dest)).toMatchObject({ files: 3, bytes: imageBytes(tree) });
    expect(readdirSync(join(dest, "images")).sort()).toEqual(["img0.png", "img1.png", "img2.png"]);
  });
});
