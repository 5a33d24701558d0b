// The one result shape in src/: a value, or why there is none. The error's type is the caller's to choose
// (a message, a 422 detail item, a refusal with its kind).
export type Result<T, E = string> = { ok: true; value: T } | { ok: false; error: E };

export const ok = <T>(value: T): { ok: true; value: T } => ({ ok: true, value });
export const fail = <E>(error: E): { ok: false; error: E } => ({ ok: false, error });
