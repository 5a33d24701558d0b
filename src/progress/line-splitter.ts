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
