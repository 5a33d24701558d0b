// Issue 47 items 1-2: the face scorer's cost and POST /dataset/check's effect on /healthz. Ten 1024-px photos (the
// face_recognition 1.3.0 sdist's five, each also mirrored, scaled to 1024 px wide) are checked by the compiled
// worker with the real scorer in the test venv while /healthz is probed every 10 ms; baseline: the same probes to
// the same worker idle. The scorer alone: one photo and ten, per photo the difference over nine, its peak RSS from
// the kernel's rusage (model load included); targets from the issue: <= 2 s a photo, <= 400 MiB.
import { join } from "node:path";
import { scorerLaunch } from "../src/likeness/scorer.ts";
import { FACE_PYTHON, FACES } from "../test/support/face-scorer.ts";
import { makeHostTree } from "../test/support/host-tree.ts";
import { startBenchWorker } from "./lib/bench-host.ts";
import { probeHealthz as probe } from "./lib/probe.ts";
import { runBench, verdict, type Row } from "./lib/report.ts";
import { ms, ratio, summarize } from "./lib/stats.ts";

const IDLE_MS = 2000;
const SOURCES = ["obama.jpg", "obama2.jpg", "obama3.jpg", "obama_partial_face.jpg", "biden.jpg"];
const SCALED = `import sys, dlib, numpy
image = dlib.load_rgb_image(sys.argv[1])
rows = (numpy.arange(int(image.shape[0] * 1024 / image.shape[1])) * image.shape[1] / 1024).astype(int)
cols = (numpy.arange(1024) * image.shape[1] / 1024).astype(int)
out = image[rows][:, cols]
dlib.save_image(numpy.ascontiguousarray(out[:, ::-1] if sys.argv[3] == "1" else out), sys.argv[2])`;

function writePhotos(dir: string): string[] {
  return SOURCES.flatMap((name) => [0, 1].map((mirrored) => {
    const to = join(dir, `${name.replace(".jpg", "")}-${mirrored}.png`);
    const made = Bun.spawnSync([FACE_PYTHON, "-c", SCALED, join(FACES, name), to, String(mirrored)]);
    if (made.exitCode !== 0) throw new Error(made.stderr.toString());
    return to;
  }));
}

async function scorerRun(paths: string[]): Promise<{ ms: number; rssMib: number }> {
  const settings = { python: FACE_PYTHON, loadSeconds: 30, secondsPerImage: 10, memoryMib: 1024 };
  const { argv, env } = scorerLaunch(settings, paths);
  const started = performance.now();
  const proc = Bun.spawn(argv, { env, stdout: "pipe", stderr: "pipe" });
  await proc.stdout.text();
  if ((await proc.exited) !== 0) throw new Error(await proc.stderr.text());
  const took = performance.now() - started;
  return { ms: took, rssMib: Number(proc.resourceUsage()!.maxRSS) / 1024 ** 2 };
}

async function measure(): Promise<Row[]> {
  const likeness = { python: FACE_PYTHON };
  const tables = () => ({ trainer: { mode: "simulate" }, simulate: { seconds_per_step: 0.5 }, likeness });
  await using host = await startBenchWorker({ tree: makeHostTree(0), tables });
  const photos = writePhotos(host.tree.dataset);
  const one = await scorerRun(photos.slice(0, 1));
  const ten = await scorerRun(photos);
  const perPhoto = (ten.ms - one.ms) / 9;
  await (await host.get("/healthz")).arrayBuffer();
  const idleUntil = performance.now() + IDLE_MS;
  const idle = summarize(await probe(host, () => performance.now() > idleUntil));
  let answered = false;
  const started = performance.now();
  const check = host.post("/dataset/check", host.tree.validRequest()).then(async (res) => {
    answered = true;
    return { status: res.status, body: (await res.json()) as any };
  });
  const during = summarize(await probe(host, () => answered));
  const { status, body } = await check;
  if (status !== 200) throw new Error(`POST /dataset/check answered ${status}: ${JSON.stringify(body)}`);
  const checkMs = performance.now() - started;
  console.log(`identity: ${JSON.stringify(body.prepared.identity.photos)}, check ${ms(checkMs)}`);
  const bench = "47 scorer";
  return [
    { bench, metric: "scorer, per 1024-px photo (10 vs 1)", figure: ms(perPhoto), baseline: `load + 1 photo ${ms(one.ms)}`,
      ratio: ratio(perPhoto / one.ms), target: "<= 2 s a photo", verdict: verdict(perPhoto, "<=", 2000) },
    { bench, metric: "scorer peak RSS, 10 photos", figure: `${ten.rssMib.toFixed(0)} MiB`,
      baseline: `1 photo ${one.rssMib.toFixed(0)} MiB`, ratio: ratio(ten.rssMib / one.rssMib), target: "<= 400 MiB",
      verdict: verdict(ten.rssMib, "<=", 400) },
    { bench, metric: `/healthz slowest during /dataset/check of 10 photos (${ms(checkMs)})`, figure: ms(during.max),
      baseline: `idle ${ms(idle.max)}`, ratio: ratio(during.max / idle.max), target: "< 100 ms",
      verdict: verdict(during.max, "<", 100) },
  ];
}

if (import.meta.main) await runBench("47 the face scorer and POST /dataset/check", measure);
