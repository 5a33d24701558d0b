import { z } from "zod";
import { RUN_TIERS, TIER_NAMES } from "../tiers.ts";
import { DETAIL_TYPES, type DetailType } from "./detail-types.ts";

// The 422 item shape arbo's Python client already reads (pydantic's), its `type` from one closed list.
export const DetailItem = z.strictObject({
  loc: z.array(z.union([z.string(), z.int()])),
  msg: z.string(),
  type: z.enum(DETAIL_TYPES).describe("what is wrong, from a closed list: docs/troubleshooting.md explains each"),
});
export type DetailItem = z.infer<typeof DetailItem>;

export function fieldError(field: string, msg: string, type: DetailType): DetailItem {
  return { loc: ["body", field], msg, type };
}

export function fieldPathError(path: Array<string | number>, msg: string, type: DetailType): DetailItem {
  return { loc: ["body", ...path], msg, type };
}

// Every zod code, so no issue leaves the closed list; the codes our schemas cannot raise read as value_error.
const TYPE_BY_CODE: Record<z.core.$ZodIssue["code"], DetailType> = {
  invalid_type: "type_error",
  too_small: "too_small",
  too_big: "too_big",
  invalid_format: "pattern_mismatch",
  invalid_value: "enum",
  custom: "value_error",
  unrecognized_keys: "extra_forbidden",
  not_multiple_of: "value_error",
  invalid_union: "value_error",
  invalid_key: "value_error",
  invalid_element: "value_error",
};

// Every issue as an item; oneEach keeps the first per field, the thing wrong with it worth reading.
function detailFromIssues(issues: z.core.$ZodIssue[], input: unknown): DetailItem[] {
  return issues.flatMap((issue): DetailItem[] => {
    if (issue.code === "unrecognized_keys") {
      const msg = "unknown field; only the documented fields are accepted";
      return issue.keys.map((k) => fieldError(k, msg, "extra_forbidden"));
    }
    const field = String(issue.path[0] ?? "");
    if (issue.path.length === 0) {
      return [{ loc: ["body"], msg: `request body must be a JSON object, got ${kindOf(input)}`, type: "type_error" }];
    }
    if (isObject(input) && !Object.hasOwn(input, field)) return [fieldError(field, "field required", "missing")];
    const value = isObject(input) ? input[field] : undefined;
    return [fieldError(field, describe(issue, value), typeOf(issue))];
  });
}

/** A body read against `schema`: its value when nothing is wrong, else one item per fault, `faults` among them. */
export function readBody<T extends z.ZodObject>(
  schema: T,
  body: unknown,
  faults: readonly DetailItem[] = [],
): { data: z.infer<T>; detail: [] } | { data: null; detail: DetailItem[] } {
  const parsed = schema.safeParse(body);
  const issues = parsed.success ? [] : detailFromIssues(parsed.error.issues, body);
  const detail = oneEach([...issues, ...faults], Object.keys(schema.shape));
  return parsed.success && detail.length === 0 ? { data: parsed.data, detail: [] } : { data: null, detail };
}

// A 422 lists this many faults and counts the rest: a body of thousands of unknown keys answers in kilobytes.
export const MAX_LISTED_FAULTS = 100;

export function listed(detail: readonly DetailItem[]): DetailItem[] {
  if (detail.length <= MAX_LISTED_FAULTS) return [...detail];
  const rest = detail.length - MAX_LISTED_FAULTS;
  const faults = rest === 1 ? "fault" : "faults";
  const msg = `and ${rest} more ${faults} not listed; a 422 lists the first ${MAX_LISTED_FAULTS}`;
  return [...detail.slice(0, MAX_LISTED_FAULTS), { loc: ["body"], msg, type: "too_many_faults" }];
}

// A custom check names its own type (e.g. "path_not_normalized"); zod's codes map to pydantic's words.
function typeOf(issue: z.core.$ZodIssue): DetailType {
  const own = issue.code === "custom" ? (issue.params as { type?: DetailType } | undefined)?.type : undefined;
  return own ?? TYPE_BY_CODE[issue.code];
}

/**
 * One item per field, the first given, in the order a form lists them: the body as a whole, then the fields in
 * `fields`' order, then fields no schema knows, then headers. A body that is not an object has no fields to name.
 */
export function oneEach(items: readonly DetailItem[], fields: readonly string[]): DetailItem[] {
  const whole = items.some((item) => item.loc.length === 1 && item.loc[0] === "body");
  const seen = new Set<string>();
  const unique: DetailItem[] = [];
  for (const item of items) {
    const key = JSON.stringify(item.loc.slice(0, 2));
    if (seen.has(key) || (whole && item.loc[0] === "body" && item.loc.length > 1)) continue;
    seen.add(key);
    unique.push(item);
  }
  const order = new Map(fields.map((field, at) => [field, at]));
  const rank = ({ loc }: DetailItem) => {
    if (loc[0] !== "body") return fields.length + 1;
    if (loc.length === 1) return -1;
    return order.get(String(loc[1])) ?? fields.length;
  };
  return unique.sort((a, b) => rank(a) - rank(b));
}

function describe(issue: z.core.$ZodIssue, value: unknown): string {
  if (issue.code === "invalid_type") {
    const expected = issue.message === "must be an integer" ? "must be an integer" : `must be a ${issue.expected}`;
    return `${expected}, got ${kindOf(value)}`;
  }
  if ((issue.code === "too_big" || issue.code === "too_small") && issue.origin === "int") {
    return `must be a safe integer, got ${kindOf(value)}`;
  }
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

const MAX_PATH_LENGTH = 1024;
// The preview templates a request may ask for (recipe/samples.ts), each drawn with the trigger and with the class.
export const MAX_SAMPLES = 4;
const SEGMENT_CHARS = "letters A-Z a-z, digits, space and . _ - + @ , = ~";
const ALLOWED = /^[A-Za-z0-9 ._+@,=~/-]$/;

// What is wrong with a field, as a 422 item says it, before the item is given its loc.
export interface Problem {
  msg: string;
  type: DetailType;
}

// Narrower than POSIX on purpose: arbo's paths are plain ASCII, so anything else (encoded or fullwidth dots,
// bidi and zero-width characters, quotes, brackets) is more likely an attack than a name.
function pathProblem(path: string): Problem | null {
  if (!path.isWellFormed()) {
    return { msg: "must be well-formed Unicode (no lone surrogates)", type: "path_malformed_unicode" };
  }
  for (const ch of path) {
    if (ALLOWED.test(ch)) continue;
    if (/[\u0000-\u001f\u007f-\u009f]/.test(ch)) {
      return { msg: `must not contain control characters (found ${codePoint(ch)})`, type: "path_control_character" };
    }
    const msg = `must not contain ${describeChar(ch)}; a path may hold only ${SEGMENT_CHARS} and /`;
    return { msg, type: "path_bad_character" };
  }
  if (!path.startsWith("/")) return { msg: "must be an absolute path", type: "path_not_absolute" };
  const segments = path.slice(1).replace(/\/$/, "").split("/");
  if (segments.some((s) => s === "" || s === "." || s === "..")) {
    return { msg: 'must be a normalized path: no ".", ".." or empty segments', type: "path_not_normalized" };
  }
  if (segments.some((s) => s.startsWith("-"))) {
    return { msg: 'no path segment may start with "-"', type: "path_option_like" };
  }
  return null;
}

// A path a caller may name; containment in a root is checked against the filesystem later.
export const requestPath = z
  .string()
  .min(1, "must not be empty")
  .max(MAX_PATH_LENGTH, `must be at most ${MAX_PATH_LENGTH} characters`)
  .check((ctx) => {
    const problem = pathProblem(ctx.value);
    if (problem) {
      ctx.issues.push({ code: "custom", message: problem.msg, params: { type: problem.type }, input: ctx.value });
    }
  });

function codePoint(ch: string): string {
  return `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
}

function describeChar(ch: string): string {
  return /^[\x21-\x7e]$/.test(ch) ? `the character ${JSON.stringify(ch)}` : `the character ${codePoint(ch)}`;
}

function samplesField() {
  return z.int("must be an integer").min(0).max(MAX_SAMPLES);
}

export const TrainRequest = z.strictObject({
  dataset_dir: requestPath,
  base_model_path: requestPath,
  output_dir: requestPath,
  output_name: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    .refine((s) => !s.includes(".."), { message: 'must not contain ".."', params: { type: "pattern_mismatch" } }),
  trigger: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/, "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
    .describe(
      "the word that calls the LoRA up: put in front of every caption of the job's dataset copy that lacks it " +
        "(`<trigger> <subject_class>, `), and named in the LoRA's header (modelspec.trigger_phrase)",
    ),
  subject_class: z
    .string()
    .regex(/^[a-z]+( [a-z]+)*$/, "must be lowercase words separated by single spaces, e.g. \"young woman\"")
    .max(32, "must be at most 32 characters"),
  repeats: z
    .int("must be an integer")
    .min(1)
    .max(100)
    .describe(
      "how many times each image is taken in one epoch (sd-scripts' num_repeats). The tier pins the steps, so it " +
        "sets the epoch's length, not how much is trained: every image is seen about steps x batch / images " +
        "times whatever it is",
    ),
  tier: z.enum(TIER_NAMES),
  device_index: z.int("must be an integer").min(0).max(63),
  seed: z.int("must be an integer").min(0).max(2 ** 32 - 1),
  // The optional fields: absent, a client that never sends them trains exactly as before.
  samples: samplesField().optional(),
  identity_check: z.enum(["warn", "refuse", "off"]).optional().describe(
    "what the upload check does with a photo of someone else (`dataset.prepared.identity`): `\"warn\"` (absent) " +
      "notes it `other_person`; `\"refuse\"` answers 422 `dataset_other_person` naming every such file, with " +
      "nothing made; `\"off\"` scores no face",
  ),
});

export type TrainRequest = z.infer<typeof TrainRequest>;

// What a job runs: arbo's request, or the worker's own smoke run, whose tier no request may name.
export const JobRequest = TrainRequest.extend({ tier: z.enum(RUN_TIERS) });
export type JobRequest = z.infer<typeof JobRequest>;

// POST /train/{id}/resume's optional body: the previews of the new run, say none after a failure while sampling.
// Absent, the run takes its predecessor's.
export const ResumeRequest = z.strictObject({ samples: samplesField().optional() });
