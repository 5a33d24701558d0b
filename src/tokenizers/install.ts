import { chmodSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { hasEntry } from "../fs.ts";
import { fail, ok, type Result } from "../result.ts";
import type { TokenizerFiles, TokenizerSpec } from "./layout.ts";

/** One tokenizer to install: its folder's name in the tokenizer dir and the checked contents of its files. */
export interface Checked {
  spec: TokenizerSpec;
  files: TokenizerFiles;
}

// Tokenizers are public data the trainer (the service user) reads, whoever ran the import.
const DIR_MODE = 0o755;
const FILE_MODE = 0o644;

interface Slot {
  to: string;
  fresh: string;
  old: string;
  replacing: boolean;
}

/**
 * Installs every tokenizer in `dir`, or none: each is written in full beside its folder first, then all are swapped
 * in, and a failure at any point puts back what was there. A trainer starting meanwhile sees old or new folders.
 */
export function installTokenizers(dir: string, tokenizers: readonly Checked[]): Result<void> {
  const slots = tokenizers.map(({ spec }) => slotOf(dir, spec));
  const writing = { path: dir };
  let created: string | undefined;
  try {
    created = mkdirSync(dir, { recursive: true, mode: DIR_MODE });
    tokenizers.forEach((t, i) => stage(t.files, slots[i]!.fresh, writing));
  } catch (err) {
    for (const slot of slots) rmSync(slot.fresh, { recursive: true, force: true });
    if (created !== undefined) rmSync(created, { recursive: true, force: true });
    return fail(`writing ${writing.path} failed: ${messageOf(err)}`);
  }
  return swapAll(slots);
}

function slotOf(dir: string, spec: TokenizerSpec): Slot {
  const to = join(dir, spec.folder);
  return { to, fresh: `${to}.import-${process.pid}`, old: `${to}.old-${process.pid}`, replacing: hasEntry(to) };
}

// `writing` follows the path being written: Bun's errors do not always name it.
function stage(files: TokenizerFiles, fresh: string, writing: { path: string }): void {
  writing.path = fresh;
  rmSync(fresh, { recursive: true, force: true });
  mkdirSync(fresh, { mode: DIR_MODE });
  chmodSync(fresh, DIR_MODE);
  for (const [name, contents] of files) {
    writing.path = join(fresh, name);
    writeFileSync(writing.path, contents, { mode: FILE_MODE });
    chmodSync(writing.path, FILE_MODE);
  }
}

// Each swap is two renames in one directory; one that fails undoes those before it, newest first.
function swapAll(slots: Slot[]): Result<void> {
  const swapped: Slot[] = [];
  for (const slot of slots) {
    try {
      swapIn(slot);
      swapped.push(slot);
    } catch (err) {
      for (const done of swapped.reverse()) swapBack(done);
      if (hasEntry(slot.old) && !hasEntry(slot.to)) renameSync(slot.old, slot.to);
      for (const s of slots) rmSync(s.fresh, { recursive: true, force: true });
      return fail(`putting ${slot.to} in place failed: ${messageOf(err)}`);
    }
  }
  for (const slot of slots) rmSync(slot.old, { recursive: true, force: true });
  return ok(undefined);
}

function swapIn(slot: Slot): void {
  if (slot.replacing) renameSync(slot.to, slot.old);
  renameSync(slot.fresh, slot.to);
}

function swapBack(slot: Slot): void {
  renameSync(slot.to, slot.fresh);
  if (slot.replacing) renameSync(slot.old, slot.to);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
