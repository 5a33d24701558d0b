// Server-Sent Events framing (WHATWG HTML §9.2.6): lines end in CRLF, LF or CR; a blank line dispatches;
// `:` starts a comment; fields `event`, `data` (joined by LF), `id`, `retry`. A CR at the end of a chunk
// may be the first half of a CRLF, so it is held until the next chunk says.

export type SseItem =
  | { kind: "event"; event: string; data: string; id: string | null }
  | { kind: "comment"; text: string }
  | { kind: "retry"; ms: number };

export class SseParser {
  private buffer = "";
  private event = "";
  private data: string[] = [];
  private id: string | null = null;

  push(chunk: string): SseItem[] {
    this.buffer += chunk;
    const items: SseItem[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\n|\r/);
      if (end === -1 || (this.buffer[end] === "\r" && end === this.buffer.length - 1)) break;
      const line = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith("\r\n", end) ? 2 : 1));
      const item = this.line(line);
      if (item) items.push(item);
    }
    return items;
  }

  private line(line: string): SseItem | null {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return { kind: "comment", text: line.slice(1).trimStart() };
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.id = value;
    else if (field === "retry" && /^\d+$/.test(value)) return { kind: "retry", ms: Number(value) };
    return null;
  }

  private dispatch(): SseItem | null {
    const item: SseItem | null = this.data.length === 0 ? null : { kind: "event", event: this.event || "message", data: this.data.join("\n"), id: this.id };
    this.event = "";
    this.data = [];
    return item;
  }
}
