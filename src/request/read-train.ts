import { type DetailItem, type JobRequest, readBody, TrainRequest } from "./schema.ts";

/** The request's fields in the schema's order: the order a 422 lists them in. */
export const FIELDS = Object.keys(TrainRequest.shape);

/** A body read field by field: the request when nothing is wrong with it, else the fields that are right. */
export interface ReadTrain {
  request: JobRequest | null;
  /** The fields whose shape is right: the checks that need the filesystem or the config run on these. */
  fields: Partial<JobRequest>;
  /** What is wrong with the shape, one item per field. */
  detail: DetailItem[];
}

/**
 * Reads a body, with `faults` the raw request showed (a duplicate key, 10.0 for an integer, a bad header): a field
 * with a fault is not among `fields`, so no check that needs it runs on what the caller did not mean.
 */
export function readTrain(body: unknown, faults: readonly DetailItem[] = []): ReadTrain {
  const { data, detail } = readBody(TrainRequest, body, faults);
  if (data !== null) return { request: data, fields: data, detail };
  const faulted = new Set(detail.filter((d) => d.loc[0] === "body").map((d) => d.loc[1]));
  const fields: Record<string, unknown> = {};
  if (typeof body === "object" && body !== null && !Array.isArray(body)) {
    for (const [name, schema] of Object.entries(TrainRequest.shape)) {
      if (faulted.has(name) || !Object.hasOwn(body, name)) continue;
      const field = schema.safeParse((body as Record<string, unknown>)[name]);
      if (field.success) fields[name] = field.data;
    }
  }
  return { request: null, fields: fields as Partial<JobRequest>, detail };
}
