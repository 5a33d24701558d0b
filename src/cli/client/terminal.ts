import { writeSync } from "node:fs";
import { printable } from "../../printable.ts";

// Where a client command writes; the entry point binds it to stdout and stderr. Much of what the commands print
// came from outside this program (trainer log lines, error text that quotes them, other users' process names), so
// on a terminal every write is shown through `printable`: a command cannot forget to. The CLI's own cursor control
// is `redraw`, the one way raw control bytes reach a terminal. A pipe gets the text unchanged (`logs ID | grep`).
export interface Terminal {
  write(text: string): void;
  /** Back to column 0 and clear the live line, then `text`: a live line redrawn in place. Only on a terminal. */
  redraw(text: string): void;
  error(text: string): void;
  /** stdout is a terminal: live redraws are allowed. */
  isTTY: boolean;
  /** How wide a line may be now: the terminal's width, unbounded into a pipe. */
  readonly columns: number;
  /** Calls `listener` after the terminal's window is resized; answers the way to stop. */
  onResize(listener: () => void): () => void;
}

const DEFAULT_COLUMNS = 80;

const REDRAW = "\r\x1b[2K";
// Up to the first row a wrapped live line now takes, then clear to the end of the screen.
const redrawRows = (rows: number) => (rows > 1 ? `\x1b[${rows - 1}A\r\x1b[J` : REDRAW);

interface TerminalSinks {
  stdout(text: string): void;
  stderr(text: string): void;
}

interface TerminalShape {
  stdoutIsTTY: boolean;
  stderrIsTTY: boolean;
  // Read on each use: a getter follows the window's width.
  readonly columns: number;
  onResize?(listener: () => void): () => void;
}

export function createTerminal(sinks: TerminalSinks, shape: TerminalShape): Terminal {
  const shown = (isTTY: boolean, text: string) => (isTTY ? printable(text) : text);
  let live = ""; // what the cursor's line holds, as shown: a live line left without its newline
  const out = (raw: string, text: string) => {
    if (raw === "" && text === "") return;
    const visible = shown(shape.stdoutIsTTY, text);
    sinks.stdout(raw + visible);
    live = (raw === "" ? live : "") + visible;
    live = live.slice(live.lastIndexOf("\n") + 1);
  };
  return {
    write: (text) => out("", text),
    // A line wider than the window (a long log line, or a bar drawn before the window narrowed: terminals
    // reflow it) takes several rows, all of which are cleared.
    redraw: (text) => out(redrawRows(Math.ceil(Bun.stringWidth(live) / Math.max(shape.columns, 1))), text),
    error(text) {
      if (live !== "") sinks.stdout("\n");
      live = "";
      sinks.stderr(shown(shape.stderrIsTTY, text));
    },
    isTTY: shape.stdoutIsTTY,
    get columns() {
      return shape.columns;
    },
    onResize: (listener) => shape.onResize?.(listener) ?? (() => {}),
  };
}

// The terminal a client command runs in: this process's stdout and stderr.
export function processTerminal(): Terminal {
  const stdoutIsTTY = process.stdout.isTTY === true;
  return createTerminal(
    { stdout: (text) => writeAll(STDOUT, text), stderr: (text) => writeAll(STDERR, text) },
    {
      stdoutIsTTY,
      stderrIsTTY: process.stderr.isTTY === true,
      get columns() {
        return stdoutIsTTY ? process.stdout.columns || DEFAULT_COLUMNS : Infinity;
      },
      onResize(listener) {
        process.stdout.on("resize", listener);
        return () => void process.stdout.off("resize", listener);
      },
    },
  );
}

const STDOUT = 1;
const STDERR = 2;

// Synchronous on purpose: the output is whole when the write returns, however slow the pipe, so that nothing
// that ends the process (process.exit, the entry point's linger deadline) can drop what is still queued.
// A reader that went away (`lora-worker jobs | head -1`) is not an error.
function writeAll(fd: number, text: string): void {
  const bytes = Buffer.from(text);
  for (let done = 0; done < bytes.length; ) {
    try {
      done += writeSync(fd, bytes, done);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EPIPE") return;
      if (code !== "EAGAIN") throw err;
      Bun.sleepSync(1); // a non-blocking pipe is full; the reader will drain it
    }
  }
}

