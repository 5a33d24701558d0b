import type { HostileCase } from "../fixtures/hostile/catalog.ts";
import type { HostTree } from "./host-tree.ts";

/** The exact bytes a catalog case sends, or null when it sends no body. */
export function caseBody(c: HostileCase, tree: HostTree): Buffer | null {
  if (c.text) return Buffer.from(c.text(tree));
  if (c.overrides) return Buffer.from(JSON.stringify(tree.validRequest(c.overrides(tree))));
  if ("value" in c) return Buffer.from(JSON.stringify(c.value));
  return null;
}

/** A Buffer body, so fetch adds no Content-Type of its own and a case can send none. */
export function caseInit(c: HostileCase, tree: HostTree, headers: Record<string, string>): RequestInit {
  const body = caseBody(c, tree);
  const type = c.contentType === undefined ? "application/json" : c.contentType;
  return {
    method: c.method ?? "POST",
    headers: { ...headers, ...(type === null ? {} : { "content-type": type }) },
    ...(body === null ? {} : { body }),
  };
}
