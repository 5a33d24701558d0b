// `bun run scratch-host DIR`: a development host in DIR that a simulate-mode worker runs on as it is, and
// that `bun run demo` uses too: handoff root, models root with a placeholder SDXL checkpoint (smoke.base_model too),
// state dir, a kohya dataset of four distinct photos' stand-ins with captions, a token, config.toml and an example
// request.json.
import { chmodSync, copyFileSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs, UsageError } from "../src/cli/args.ts";
import { encodePng } from "../src/png.ts";
import { safetensorsParts } from "../src/safetensors/write.ts";
import { FACES_480 } from "../test/support/face-scorer.ts";

const REPO = join(import.meta.dir, "..");
const DEFAULT_LISTEN = "127.0.0.1:8203";
// A `fast` job (400 steps) takes about 400 × this, plus a few steps' worth of loading and caching. Slow enough for
// `lora-worker smoke`: its pause must land on the state of step 2, which the worker verifies by looking every 250 ms
// (src/supervisor/checkpoints.ts), before the run reaches step 4.
const DEFAULT_SECONDS_PER_STEP = 0.2;
const FAST_STEPS = 400;
// The simulator loads the model and caches latents and text-encoder outputs, each taking one step's time.
const STAGE_STEPS = 3;
// A person's photos as arbo would hand them over: each its own picture at a size no tier scales up, captioned as a
// person captions them (the trigger in one; the worker puts it into the others), so a job's record reads as a real
// one does. The simulator only counts images.
const PHOTOS: Array<{ name: string; caption: string; tint: number[] }> = [
  { name: "coat.png", caption: "a woman in a red coat, smiling, outdoors", tint: [200, 120, 90] },
  { name: "portrait.png", caption: "ohwx person, close-up portrait, soft window light", tint: [70, 130, 180] },
  { name: "reading.png", caption: "a woman reading on a sofa, indoors", tint: [120, 170, 90] },
  { name: "beach.png", caption: "full-body photo, standing on a beach at sunset", tint: [180, 90, 160] },
];
const PHOTO_PX = 1024; // the largest tier's resolution: no image is small
// With `faces`: real photos of one person (test/fixtures/faces/SOURCES.md, at 480 px) stand in for the drawn
// ones, and the simulator's previews show someone else until LEARNED_AT, then that person, so the face scorer
// sees the run learn (the likeness report: docs/likeness.md).
const FACE_PHOTOS = ["obama.jpg", "obama3.jpg", "obama2.jpg"];
const LEARNED_AT = 200;

export interface ScratchFaces {
  /** The face scorer's Python: `[likeness] python`. */
  python: string;
}

// A tinted gradient with a light disc (the "face") at a place of its own: distinct bytes, small files.
function photo(index: number, tint: number[]): Uint8Array {
  const [r, g, b] = tint as [number, number, number];
  const [cx, cy, radius] = [300 + 150 * index, 420, 220];
  return encodePng(PHOTO_PX, PHOTO_PX, (x, y) => {
    const shade = y >> 3;
    if ((x - cx) ** 2 + (y - cy) ** 2 < radius * radius) return [255 - shade, 220 - (shade >> 1), 200 - (shade >> 1)];
    return [(r + shade) & 255, (g + (x >> 4)) & 255, b];
  });
}
const EXIT_NOT_EMPTY = 1;
const EXIT_USAGE = 2;

export interface ScratchHost {
  dir: string;
  configPath: string;
  requestPath: string;
  tokenPath: string;
  handoff: string;
  request: Record<string, unknown>;
}

export interface ScratchOptions {
  listen?: string;
  secondsPerStep?: number;
  faces?: ScratchFaces;
}

export function layOutScratchHost(dir: string, opts: ScratchOptions = {}): ScratchHost {
  const at = (...parts: string[]) => join(dir, ...parts);
  const handoff = at("train");
  const dataset = join(handoff, "example", "dataset");
  for (const path of [at("models"), at("state"), join(dataset, "10_ohwx person")]) mkdirSync(path, { recursive: true });
  chmodSync(handoff, 0o2770); // as install.sh makes it: setgid, nothing for others
  const folder = join(dataset, "10_ohwx person");
  if (opts.faces === undefined) {
    PHOTOS.forEach(({ name, caption, tint }, i) => {
      writeFileSync(join(folder, name), photo(i, tint));
      writeFileSync(join(folder, name.replace(/\.png$/, ".txt")), `${caption}\n`);
    });
  } else {
    FACE_PHOTOS.forEach((name, i) => {
      copyFileSync(join(FACES_480, name), join(folder, name));
      writeFileSync(join(folder, name.replace(/\.jpg$/, ".txt")), `${PHOTOS[i]!.caption}\n`);
    });
  }
  writeFileSync(at("models", "sdxl-base.safetensors"), Buffer.concat(sdxlPlaceholder()));
  const tokenPath = at("token");
  const token = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex");
  writeFileSync(tokenPath, `${token}\n`, { mode: 0o600 });
  const configPath = at("config.toml");
  const secondsPerStep = opts.secondsPerStep ?? DEFAULT_SECONDS_PER_STEP;
  writeFileSync(configPath, config(dir, opts.listen ?? DEFAULT_LISTEN, secondsPerStep, opts.faces));
  const request = {
    dataset_dir: dataset,
    base_model_path: at("models", "sdxl-base.safetensors"),
    output_dir: join(handoff, "example", "out"),
    output_name: "ohwx_person",
    trigger: "ohwx",
    subject_class: "person",
    repeats: 10,
    tier: "fast",
    device_index: 0,
    seed: 1234,
    // Previews at four points, each scored against the dataset's person.
    ...(opts.faces === undefined ? {} : { samples: 1 }),
  };
  const requestPath = at("request.json");
  writeFileSync(requestPath, `${JSON.stringify(request, null, 2)}\n`);
  return { dir, configPath, requestPath, tokenPath, handoff, request };
}

function config(dir: string, listen: string, secondsPerStep: number, faces: ScratchFaces | undefined): string {
  return `listen = ${JSON.stringify(listen)}
state_dir = ${JSON.stringify(join(dir, "state"))}
handoff_root = ${JSON.stringify(join(dir, "train"))}
model_roots = [${JSON.stringify(join(dir, "models"))}]

[trainer]
mode = "simulate"

[simulate]
# A run takes about total steps × this (fast: 400 steps); the default, 0.5, makes a fast job over 3 minutes.
seconds_per_step = ${secondsPerStep}
${faces === undefined ? "" : previewsAndScorer(faces)}
[gpu]
nvidia_smi = ${JSON.stringify(join(REPO, "scripts/fake-nvidia-smi"))}

[auth]
token_file = ${JSON.stringify(join(dir, "token"))}
# Not written: this host's screens have no read-only tokens (and never read those of a worker installed here).
read_token_file = ${JSON.stringify(join(dir, "read-token"))}

[smoke]
# What \`lora-worker smoke\` trains on: the placeholder checkpoint, which the simulated trainer never loads.
base_model = ${JSON.stringify(join(dir, "models", "sdxl-base.safetensors"))}
`;
}

// The simulator's previews learn the person at LEARNED_AT, and the worker scores them with the face model.
function previewsAndScorer(faces: ScratchFaces): string {
  return `preview_subject = ${JSON.stringify(join(FACES_480, "obama2.jpg"))}
preview_other = ${JSON.stringify(join(FACES_480, "biden.jpg"))}
preview_learned_at = ${LEARNED_AT}

[likeness]
python = ${JSON.stringify(faces.python)}
# The scorer runs at nice 10: on a busy development machine it has the CPU only when other work leaves it.
seconds_per_image = 60
`;
}

// The worker reads a base model's header and refuses anything but an SDXL checkpoint; the simulator loads
// nothing. So: one tiny tensor under each of the four prefixes an SDXL checkpoint has.
function sdxlPlaceholder(): Uint8Array[] {
  const names = [
    "model.diffusion_model.out.2.bias",
    "conditioner.embedders.0.transformer.text_model.final_layer_norm.weight",
    "conditioner.embedders.1.model.logit_scale",
    "first_stage_model.quant_conv.bias",
  ];
  const tensors = names.map((name) => ({ name, dtype: "F16" as const, shape: [2], data: new Uint8Array(4) }));
  return safetensorsParts(tensors, { "modelspec.architecture": "lora-worker scratch-host placeholder" });
}

function isEmptyOrMissing(dir: string): boolean {
  try {
    return readdirSync(dir).length === 0;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
}

function main(argv: string[]): number {
  const { positional, values } = parseArgs(argv, { values: ["listen", "seconds-per-step"] });
  if (positional.length !== 1) throw new UsageError("takes exactly one DIR");
  const secondsPerStep = values["seconds-per-step"] === undefined ? undefined : Number(values["seconds-per-step"]);
  if (secondsPerStep !== undefined && !(secondsPerStep >= 0 && secondsPerStep <= 60)) {
    const got = JSON.stringify(values["seconds-per-step"]);
    throw new UsageError(`--seconds-per-step must be a number of seconds from 0 to 60, got ${got}`);
  }
  const dir = resolve(positional[0]!);
  if (!isEmptyOrMissing(dir)) {
    process.stderr.write(`scratch-host: ${dir} exists and is not empty; name a new directory (or remove this one)\n`);
    return EXIT_NOT_EMPTY;
  }
  const host = layOutScratchHost(dir, { listen: values.listen, secondsPerStep });
  const seconds = Math.ceil((FAST_STEPS + STAGE_STEPS) * (secondsPerStep ?? DEFAULT_SECONDS_PER_STEP));
  process.stdout.write(`scratch host in ${dir}:
  config   ${host.configPath}   (simulate mode, fake nvidia-smi, listen ${values.listen ?? DEFAULT_LISTEN})
  request  ${host.requestPath}  (tier fast, 400 steps: about ${seconds} s)
  token    ${host.tokenPath}
next, from ${REPO}:
  bun src/main.ts serve --config ${host.configPath}
  bun src/main.ts submit ${host.requestPath} --config ${host.configPath} --follow     # in a second terminal
  bun src/main.ts smoke --config ${host.configPath} --device 0     # the deployment check, on the simulator
`);
  return 0;
}

if (import.meta.main) {
  try {
    process.exit(main(process.argv.slice(2)));
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    const usage = "usage: bun run scratch-host DIR [--listen HOST:PORT] [--seconds-per-step S]";
    process.stderr.write(`scratch-host: ${err.message}\n${usage}\n`);
    process.exit(EXIT_USAGE);
  }
}
