import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CAPTION_EXTENSION } from "../request/dataset.ts";
import { encodePng } from "../png.ts";

/** The folder of the handoff root that holds the smoke runs' datasets and outputs, one folder a run. */
export const SMOKE_FOLDER = ".lora-worker-smoke";
// A smoke run's subject: the words its captions and its folder name use.
export const SMOKE_TRIGGER = "smoke";
export const SMOKE_CLASS = "person";
// Test patterns, then photos of a face: a smoke run scores its dataset's identity and its previews as a job does.
const PATTERNS = 2;
const SIZE = 256;
// The handoff root is shared with arbo's group: what the worker writes there stays group-writable.
const DIR_MODE = 0o2770;
const FILE_MODE = 0o660;

// One caption past one CLIP window (about 100 tokens), as some datasets write them: the run then trains on two
// windows (--max_token_length, recipe/command.ts), so a smoke run proves this sd-scripts takes that path too.
const LONG_DESCRIPTION = "described at length as a person writes a caption for a photo of themselves: standing in " +
  "soft morning light by a tall window, wearing a dark blue wool coat over a white shirt, short brown hair, a calm " +
  "face turned slightly to the left, a small silver ring on one hand, a leather bag on the shoulder, a wooden table " +
  "and a green plant behind, a city street seen through the glass, warm colours, sharp focus, high detail";

/**
 * Writes a few small pictures with captions into `dir`: enough for sd-scripts to build a bucket and train, two of
 * them the JPEG photos `faces` of one person. Each file is created exclusively ("wx"): a name already there, even a
 * link, is an error, never written through.
 */
export function writeSmokeDataset(dir: string, faces: readonly string[]): void {
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  const images = PATTERNS + faces.length;
  for (let i = 0; i < images; i++) {
    const name = `smoke-${i}`;
    const face = faces[i - PATTERNS];
    // A different gradient and stripe per pattern, so the latents differ.
    const png = () => encodePng(SIZE, SIZE, (x, y) => [(x + 40 * i) % 256, (y * (i + 1)) % 256, ((x ^ y) >> i) & 255]);
    const [file, bytes] = face === undefined ? [`${name}.png`, png()] : [`${name}.jpg`, readFileSync(face)];
    writeFileSync(join(dir, file), bytes, { mode: FILE_MODE, flag: "wx" });
    const what = face === undefined ? `test pattern ${i}, gradient, stripes` : "a photo of a face";
    const short = `${SMOKE_TRIGGER} ${SMOKE_CLASS}, ${what}`;
    const caption = i === images - 1 ? `${short}, ${LONG_DESCRIPTION}` : short;
    writeFileSync(join(dir, `${name}${CAPTION_EXTENSION}`), `${caption}\n`, { mode: FILE_MODE, flag: "wx" });
  }
}
