import type { LossPoint } from "../job.ts";
import { applyLine, initialProgress, parseTqdmBar, type Progress } from "./progress.ts";

// Framing of sd-scripts' combined stdout+stderr log. tqdm redraws its bar as "\r" + the whole line
// and writes "\n" only when the bar closes; everything else ends in "\n" (or "\r\n" on Windows).
// So "\r", "\n" and "\r\n" all end a record, and the empty records between them carry nothing.
// A record longer than MAX_RECORD_CHARS keeps its first MAX_RECORD_CHARS characters: the start of
// a line is what identifies it, and the excess is dropped up to the next separator.

export const MAX_RECORD_CHARS = 64 * 1024;

const SEPARATOR = /[\r\n]/;

export class LineSplitter {
  private tail = "";

  // The pieces between two separators are whole records as they stand; only the first joins the tail.
  push(chunk: string): string[] {
    const pieces = chunk.split(SEPARATOR);
    this.append(pieces[0]!);
    if (pieces.length === 1) return [];
    const records = this.flush();
    for (let i = 1; i < pieces.length - 1; i++) {
      if (pieces[i] !== "") records.push(pieces[i]!.slice(0, MAX_RECORD_CHARS));
    }
    this.append(pieces[pieces.length - 1]!);
    return records;
  }

  // The record still being written: tqdm ends a redraw only with the "\r" of the next one.
  pending(): string {
    return this.tail;
  }

  flush(): string[] {
    const record = this.tail;
    this.tail = "";
    return record === "" ? [] : [record];
  }

  private append(piece: string): void {
    if (this.tail.length >= MAX_RECORD_CHARS) return;
    this.tail = (this.tail + piece).slice(0, MAX_RECORD_CHARS);
  }
}

// One run's progress from the trainer's raw output: the line framing, the "a redraw is whole at ]" rule, one loss
// point per step, and when the durable record is due. Pure: no process and no store; the supervisor wires it.
interface TrackerOptions {
  expectedTotal: number | null;
  // The step of the state a resumed run started from; 0 for a fresh run.
  resumedAt?: number;
  // Consecutive nan readings that stop the run.
  nanUpdates: number;
  // The durable row is refreshed at most this often (and at once on a new phase).
  persistEveryMs: number;
  now?: () => number;
}

// What one chunk of output changed.
interface Update {
  changed: boolean;
  persistDue: boolean;
  // The nan streak reached its limit with this chunk (once per run).
  nanTripped: boolean;
  // A total the trainer printed that contradicts the run's, seen for the first time.
  contradiction: number | null;
  // The step of the newest state the trainer said it is saving in this chunk (sd-scripts' save_state), or null.
  savingState: number | null;
}

const SAVING_STATE = /^saving state at step (\d+)$/;

// A whole redraw that the next record repeats up to its " [" (the same bar at the same step of the same total)
// adds no step and no loss point that the next one does not: a trainer's flood of redraws is mostly skipped unparsed.
function superseded(line: string, next: string | undefined): boolean {
  if (next === undefined || !line.endsWith("]")) return false;
  const head = line.indexOf(" [");
  return head > 0 && next.startsWith(line.slice(0, head + 2));
}

export function createTracker(options: TrackerOptions) {
  const now = options.now ?? Date.now;
  const splitter = new LineSplitter();
  let progress = initialProgress(options.expectedTotal, options.resumedAt);
  let lossPoints: LossPoint[] = [];
  let persistedAt = Number.NEGATIVE_INFINITY;
  let savingState: number | null = null;

  const apply = (line: string) => {
    const saving = line.length < 40 ? SAVING_STATE.exec(line.trim()) : null;
    if (saving !== null) savingState = Number(saving[1]);
    const next = applyLine(progress, line);
    const lossChanged = next.loss !== progress.loss || next.last_loss_nan !== progress.last_loss_nan;
    if (next.step > 0 && (next.step !== progress.step || lossChanged)) {
      lossPoints.push([next.step, next.last_loss_nan ? null : next.loss]);
    }
    progress = next;
  };

  return {
    push(text: string): Update {
      const before = progress;
      savingState = null;
      const lines = splitter.push(text);
      for (let i = 0; i < lines.length; i++) if (!superseded(lines[i]!, lines[i + 1])) apply(lines[i]!);
      // A bar redraw is whole once its "]" is written; waiting for the next "\r" would report every step a step
      // late (a whole step, at SDXL's pace). Applying it again later changes nothing.
      const drawing = splitter.pending();
      if (drawing.endsWith("]") && parseTqdmBar(drawing)?.trailing === "") apply(drawing);
      const changed = progress !== before;
      return {
        changed,
        persistDue: changed && (progress.phase !== before.phase || now() - persistedAt >= options.persistEveryMs),
        nanTripped: progress.nan_streak >= options.nanUpdates && before.nan_streak < options.nanUpdates,
        contradiction: before.contradicting_total === null ? progress.contradicting_total : null,
        savingState,
      };
    },
    /** The output has ended: what is still unterminated counts too. */
    flush(): void {
      for (const line of splitter.flush()) apply(line);
    },
    progress: (): Progress => progress,
    /** Loss points not yet on record. */
    pendingLoss: (): LossPoint[] => lossPoints,
    /** A write was attempted now; the points it carried are on record only if it succeeded. */
    persisted(saved: boolean): void {
      persistedAt = now();
      if (saved) lossPoints = [];
    },
  };
}

