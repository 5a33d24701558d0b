// What the real runs printed and wrote, kept as data: each job's log and record, its run dir's listing, the JSON
// header of each LoRA (metadata and tensor layout, not the weights) and the head of each preview PNG.
import { copyFileSync, existsSync, openSync, readdirSync, readSync, closeSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import type { Host } from "./host.ts";

const PNG_HEAD_BYTES = 33; // signature and the IHDR chunk

/** The job's train.log and record, and what the trainer wrote (its run directory), under `name` in `recordings`. */
export function recordJob(host: Host, view: any, recordings: string, name: string): void {
  const dir = join(host.state, "jobs", view.worker_job_id);
  const log = join(dir, "train.log");
  if (existsSync(log)) copyFileSync(log, join(recordings, `${name}.log`));
  writeFileSync(join(recordings, `${name}.json`), `${JSON.stringify(view, null, 2)}\n`);
  if (existsSync(join(dir, "run"))) recordOutput(join(dir, "run"), recordings, name);
}

/** The smoke CLI's own lines and the logs of the jobs they name (its folder is gone once it passed). */
export function recordSmoke(output: string, host: Host, recordings: string): void {
  writeFileSync(join(recordings, "smoke-cli.txt"), output);
  const ids = [...new Set(output.match(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? [])];
  ids.forEach((id, i) => {
    const log = join(host.state, "jobs", id, "train.log");
    if (existsSync(log)) copyFileSync(log, join(recordings, `smoke-${i + 1}.log`));
  });
}

function recordOutput(out: string, recordings: string, name: string): void {
  const files = walk(out);
  const listing = files.map((f) => `${statSync(f).size.toString().padStart(12)}  ${relative(out, f)}`);
  writeFileSync(join(recordings, `${name}-output.txt`), `${listing.join("\n")}\n`);
  for (const file of files) {
    const rel = relative(out, file).replaceAll("/", "__");
    if (file.endsWith(".safetensors")) writeFileSync(join(recordings, `${name}-${rel}.header.json`), safetensorsHeader(file));
    if (file.endsWith(".png")) writeFileSync(join(recordings, `${name}-${rel}.head.hex`), `${head(file, PNG_HEAD_BYTES)}\n`);
  }
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]))
    .sort();
}

// The 8-byte little-endian length, then that many bytes of JSON.
function safetensorsHeader(file: string): string {
  const fd = openSync(file, "r");
  try {
    const prefix = Buffer.alloc(8);
    readSync(fd, prefix, 0, 8, 0);
    const json = Buffer.alloc(Number(prefix.readBigUInt64LE(0)));
    readSync(fd, json, 0, json.length, 8);
    return `${JSON.stringify(JSON.parse(json.toString("utf8")), null, 1)}\n`;
  } finally {
    closeSync(fd);
  }
}

function head(file: string, bytes: number): string {
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(bytes);
    const n = readSync(fd, buf, 0, bytes, 0);
    return buf.subarray(0, n).toString("hex");
  } finally {
    closeSync(fd);
  }
}
