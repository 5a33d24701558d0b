// Text from outside this program (trainer log lines, error text quoting them, other users' process names, a
// mistyped option) as a terminal may show it: every control character that a terminal would act on (C0 but tab
// and newline, DEL, C1) is shown in caret notation, as `cat -v` shows it, so ESC[2J reads `^[[2J` instead of
// clearing the screen and an OSC title ends in a visible `^G` instead of retitling the window.
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

export function printable(text: string): string {
  return text.replace(CONTROL, caret);
}

// C1 (U+0080–U+009F) is C0 with the high bit set: `M-` and the caret form, as `cat -v` writes it.
function caret(c: string): string {
  const code = c.charCodeAt(0);
  const prefix = code >= 0x80 ? "M-" : "";
  const low = code & 0x7f;
  return `${prefix}^${low === 0x7f ? "?" : String.fromCharCode(low ^ 0x40)}`;
}
