import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { SseParser } from "../../src/cli/client/sse.ts";

// Checks real answers against an OpenAPI 3.1 document with a JSON Schema 2020-12 validator. The document is added
// whole, under a key of its own, and each schema is compiled by its JSON pointer: its `#/components/...` refs then
// resolve inside the document, as a client generator resolves them.

export interface Answer {
  method: string;
  /** The request's path, without its query. */
  path: string;
  status: number;
  contentType: string | null;
  body: string;
}

const KEY = "openapi.json";
// The document's own fields, which are not JSON Schema keywords: known, so strict mode allows them, and not compiled.
const DOCUMENT_FIELDS = ["openapi", "info", "servers", "components", "security", "paths"];

// RFC 6901 escapes a segment; a URI fragment then needs what is left percent-encoded.
const pointer = (...segments: string[]) =>
  segments.map((s) => encodeURIComponent(s.replaceAll("~", "~0").replaceAll("/", "~1"))).join("/");

export type DocumentCheck = ReturnType<typeof documentCheck>;

export function documentCheck(doc: any) {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats(ajv);
  ajv.addVocabulary(DOCUMENT_FIELDS);
  ajv.addSchema(doc, KEY);
  const validate = (at: string, value: unknown): string[] => {
    const check = ajv.getSchema(`${KEY}#/${at}`);
    if (check === undefined) return [`no schema at ${at}`];
    if (check(value)) return [];
    return (check.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message} ${JSON.stringify(e.params)}`);
  };
  const templates = Object.keys(doc.paths).map((t): [string, RegExp] => [t, new RegExp(`^${t.replace(/\{\w+\}/g, "[^/]+")}$`)]);
  const covered = new Set<string>();
  const errors: string[] = [];

  const check = (a: Answer): string[] => {
    const method = a.method.toLowerCase();
    const template = templates.find(([, pattern]) => pattern.test(a.path))?.[0];
    if (template === undefined) return [`${a.method} ${a.path}: no such path in the document`];
    const at = `${a.method} ${template} ${a.status}`;
    const response = doc.paths[template][method]?.responses?.[a.status];
    if (response === undefined) return [`${at}: not in the document`];
    covered.add(at);
    if (response.content === undefined) return a.body === "" ? [] : [`${at}: a body where the document lists none`];
    const type = a.contentType?.split(";")[0]!.trim() ?? "(none)";
    const media = response.content[type];
    if (media === undefined) return [`${at}: ${type}, not one of ${Object.keys(response.content).join(", ")}`];
    const base = ["paths", template, method, "responses", String(a.status), "content", type];
    const found = (schema: string, value: unknown) => validate(pointer(...base, schema), value).map((e) => `${at}: ${e}`);
    if (type === "application/json") return found("schema", parsed(a.body));
    if (media["x-event-schema"] !== undefined) return eventsOf(a.body).flatMap((e) => found("x-event-schema", e));
    return [];
  };

  return {
    /** Why the answer is not as the document says; none when it is. Every answer's problems are kept in `errors`. */
    check(a: Answer): string[] {
      const found = check(a);
      errors.push(...found);
      return found;
    },
    /** Validates a value against a named component. */
    component: (name: string, value: unknown) => validate(pointer("components", "schemas", name), value),
    errors: () => errors,
    /** "METHOD /template STATUS" of each documented answer that a checked answer was. */
    covered: () => [...covered],
    documented: () =>
      Object.entries<any>(doc.paths).flatMap(([path, item]) =>
        Object.entries<any>(item).flatMap(([method, op]) =>
          Object.keys(op.responses).map((status) => `${method.toUpperCase()} ${path} ${status}`),
        ),
      ),
  };
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The stream's events as the document describes them: each `data:` line parsed as JSON. */
export function eventsOf(stream: string): Array<{ event: string; id: string | null; data: unknown }> {
  return new SseParser()
    .push(stream)
    .flatMap((item) => (item.kind === "event" ? [{ event: item.event, id: item.id, data: parsed(item.data) }] : []));
}
