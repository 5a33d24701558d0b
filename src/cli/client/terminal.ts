import { printable } from "../../text/printable.ts";

/**
 * Where a client command writes; the entry point binds it to stdout and stderr. Much of what the commands print
 * came from outside this program (trainer log lines, error text that quotes them, other users' process names), so
 * on a terminal every write is shown through `printable`: a command cannot forget to. The CLI's own cursor control
 * is `redraw`, the one way raw control bytes reach a terminal. A pipe gets the text unchanged (`logs ID | grep`).
 */
export interface Terminal {
  write(text: string): void;
  /** Back to column 0 and clear the line, then `text`: a live line redrawn in place. Only on a terminal. */
  redraw(text: string): void;
  error(text: string): void;
  /** stdout is a terminal: live redraws are allowed. */
  isTTY: boolean;
  columns: number;
}

export const DEFAULT_COLUMNS = 80;

const REDRAW = "\r\x1b[2K";

export interface TerminalSinks {
  stdout(text: string): void;
  stderr(text: string): void;
}

export interface TerminalShape {
  stdoutIsTTY: boolean;
  stderrIsTTY: boolean;
  columns: number;
}

export function createTerminal(sinks: TerminalSinks, shape: TerminalShape): Terminal {
  const shown = (isTTY: boolean, text: string) => (isTTY ? printable(text) : text);
  let lineOpen = false; // a live line left without its newline
  const out = (raw: string, text: string) => {
    if (raw === "" && text === "") return;
    sinks.stdout(raw + shown(shape.stdoutIsTTY, text));
    lineOpen = !text.endsWith("\n");
  };
  return {
    write: (text) => out("", text),
    redraw: (text) => out(REDRAW, text),
    error(text) {
      if (lineOpen) sinks.stdout("\n");
      lineOpen = false;
      sinks.stderr(shown(shape.stderrIsTTY, text));
    },
    isTTY: shape.stdoutIsTTY,
    columns: shape.columns,
  };
}
