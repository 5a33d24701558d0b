import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openApiDocument } from "../../src/api/openapi-document.ts";
import { DETAIL_TYPES } from "../../src/request/detail-types.ts";
import { DetailItem } from "../../src/request/schema.ts";

const TROUBLESHOOTING = join(import.meta.dir, "../../docs/troubleshooting.md");

// The first cells of the table under the 422 heading: one `type` a row.
function documentedTypes(page: string): string[] {
  const section = page.slice(page.indexOf("## A request refused field by field: `422`"));
  const end = section.indexOf("\n## ", 1);
  return (end === -1 ? section : section.slice(0, end))
    .split("\n")
    .filter((line) => line.startsWith("| `"))
    .slice(1) // the header row, "| `type` |"
    .map((line) => /^\| `([a-z_]+)` \|/.exec(line)?.[1] ?? line);
}

// The table is the one place a 422 item's type is spelled: the document enumerates it and the docs explain it.
describe("the closed list of 422 item types", () => {
  test("the OpenAPI document's DetailItem.type enumerates the table, in its order", () => {
    const doc = openApiDocument("test") as any;
    expect(doc.components.schemas.DetailItem.properties.type.enum).toEqual([...DETAIL_TYPES]);
  });

  test("docs/troubleshooting.md explains each type in a row of its own, and no other", () => {
    expect(documentedTypes(readFileSync(TROUBLESHOOTING, "utf8"))).toEqual([...DETAIL_TYPES]);
  });

  test("contrast: a page missing one type, or naming a stray one, is caught", () => {
    const page = readFileSync(TROUBLESHOOTING, "utf8");
    const without = page.replace(/^\| `enum` \|.*\n/m, "");
    expect(documentedTypes(without)).not.toEqual([...DETAIL_TYPES]);
    const stray = page.replace("| `enum` |", "| `invalid_value` |");
    expect(documentedTypes(stray)).toContain("invalid_value");
    expect(documentedTypes(stray)).not.toEqual([...DETAIL_TYPES]);
  });

  test("an item whose type is not in the table does not match the schema answers are checked against", () => {
    const item = { loc: ["body", "tier"], msg: "m", type: "enum" };
    expect(DetailItem.safeParse(item).success).toBe(true);
    expect(DetailItem.safeParse({ ...item, type: "invalid_value" }).success).toBe(false);
  });
});
