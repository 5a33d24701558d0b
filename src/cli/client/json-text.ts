// JSON.stringify escapes C0 but leaves DEL and C1 raw, which a terminal would get shown as ^? and M-^[ (changing
// the JSON) or act on. As \u escapes they are the same JSON value: exact on a pipe, inert on a terminal.
const RAW_CONTROL = /[\x7f-\x9f]/g;

/** `value` as JSON on one line, with no control character left raw. */
export function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(RAW_CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
