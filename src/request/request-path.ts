import { z } from "zod";

export const MAX_PATH_LENGTH = 1024;
const SEGMENT_CHARS = "letters A-Z a-z, digits, space and . _ - + @ , = ~";
const ALLOWED = /^[A-Za-z0-9 ._+@,=~/-]$/;

export interface PathProblem {
  msg: string;
  type: string;
}

// Narrower than POSIX on purpose: arbo's paths are plain ASCII, so anything else (encoded or fullwidth dots,
// bidi and zero-width characters, quotes, brackets) is more likely an attack than a name.
export function pathProblem(path: string): PathProblem | null {
  if (!path.isWellFormed()) return { msg: "must be well-formed Unicode (no lone surrogates)", type: "path_malformed_unicode" };
  for (const ch of path) {
    if (ALLOWED.test(ch)) continue;
    if (/[\u0000-\u001f\u007f-\u009f]/.test(ch)) return { msg: `must not contain control characters (found ${codePoint(ch)})`, type: "path_control_character" };
    return { msg: `must not contain ${describeChar(ch)}; a path may hold only ${SEGMENT_CHARS} and /`, type: "path_bad_character" };
  }
  if (!path.startsWith("/")) return { msg: "must be an absolute path", type: "path_not_absolute" };
  const segments = path.slice(1).replace(/\/$/, "").split("/");
  if (segments.some((s) => s === "" || s === "." || s === "..")) {
    return { msg: 'must be a normalized path: no ".", ".." or empty segments', type: "path_not_normalized" };
  }
  if (segments.some((s) => s.startsWith("-"))) return { msg: 'no path segment may start with "-"', type: "path_option_like" };
  return null;
}

// A path a caller may name; containment in a root is checked against the filesystem later.
export const requestPath = z
  .string()
  .min(1, "must not be empty")
  .max(MAX_PATH_LENGTH, `must be at most ${MAX_PATH_LENGTH} characters`)
  .check((ctx) => {
    const problem = pathProblem(ctx.value);
    if (problem) ctx.issues.push({ code: "custom", message: problem.msg, params: { type: problem.type }, input: ctx.value });
  });

function codePoint(ch: string): string {
  return `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
}

function describeChar(ch: string): string {
  return /^[\x21-\x7e]$/.test(ch) ? `the character ${JSON.stringify(ch)}` : `the character ${codePoint(ch)}`;
}
