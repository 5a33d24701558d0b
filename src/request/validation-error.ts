import type { z } from "zod";

// The 422 item shape arbo's Python client already reads (pydantic's).
export interface DetailItem {
  loc: Array<string | number>;
  msg: string;
  type: string;
}

export function fieldError(field: string, msg: string, type: string): DetailItem {
  return { loc: ["body", field], msg, type };
}

export function fieldPathError(path: Array<string | number>, msg: string, type: string): DetailItem {
  return { loc: ["body", ...path], msg, type };
}

const TYPE_BY_CODE: Record<string, string> = {
  invalid_type: "type_error",
  too_small: "too_small",
  too_big: "too_big",
  invalid_format: "pattern_mismatch",
  invalid_value: "enum",
  custom: "value_error",
};

// One item per field: the first thing wrong with it is the one worth reading.
export function detailFromIssues(issues: z.core.$ZodIssue[], input: unknown): DetailItem[] {
  const items = issues.flatMap((issue) => {
    if (issue.code === "unrecognized_keys") {
      return issue.keys.map((k) => fieldError(k, "unknown field; only the documented fields are accepted", "extra_forbidden"));
    }
    const field = String(issue.path[0] ?? "");
    if (issue.path.length === 0) return [{ loc: ["body"], msg: `request body must be a JSON object, got ${kindOf(input)}`, type: "type_error" }];
    if (isObject(input) && !Object.hasOwn(input, field)) return [fieldError(field, "field required", "missing")];
    const value = isObject(input) ? input[field] : undefined;
    return [fieldError(field, describe(issue, value), typeOf(issue))];
  });
  return items.filter((item, i) => items.findIndex((o) => o.loc.join("/") === item.loc.join("/")) === i);
}

// A custom check names its own type (e.g. "path_not_normalized"); zod's codes map to pydantic's words.
function typeOf(issue: z.core.$ZodIssue): string {
  const own = issue.code === "custom" ? (issue.params as { type?: unknown } | undefined)?.type : undefined;
  return typeof own === "string" ? own : (TYPE_BY_CODE[issue.code] ?? issue.code);
}

function describe(issue: z.core.$ZodIssue, value: unknown): string {
  if (issue.code === "invalid_type") return `${issue.message === "must be an integer" ? "must be an integer" : `must be a ${issue.expected}`}, got ${kindOf(value)}`;
  if ((issue.code === "too_big" || issue.code === "too_small") && issue.origin === "int") return `must be a safe integer, got ${kindOf(value)}`;
  if (issue.code === "too_small" && typeof issue.minimum !== "undefined" && issue.origin === "number") {
    return `must be at least ${issue.minimum}`;
  }
  if (issue.code === "too_big" && typeof issue.maximum !== "undefined" && issue.origin === "number") {
    return `must be at most ${issue.maximum}`;
  }
  if (issue.code === "invalid_value") return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
  return issue.message;
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number" && !Number.isInteger(value)) return `the non-integer ${value}`;
  if (typeof value === "number" && !Number.isSafeInteger(value)) return `the unsafe integer ${value}`;
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
