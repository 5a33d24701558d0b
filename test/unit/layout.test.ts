import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { REPO } from "../support/host-tree.ts";

const SRC = join(REPO, "src");

// src/'s top-level folders form floors: main.ts is the top, the root's other files the bottom, and following
// imports from one folder to another never comes back round.
function floorOf(file: string): string {
  const [first, ...rest] = relative(SRC, file).split("/");
  if (rest.length > 0) return first!;
  return first === "main.ts" ? "(main)" : "(root)";
}

// Every import of src/, type-only ones included, as [importing file, imported file].
function imports(): Array<[string, string]> {
  const files = readdirSync(SRC, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts")).map((f) => join(SRC, f));
  return files.flatMap((file) =>
    [...readFileSync(file, "utf8").matchAll(/from "(\.[^"]+)"/g)].map(([, spec]): [string, string] => [file, resolve(dirname(file), spec!)]));
}

function graphOf(edges: Array<[string, string]>, node: (file: string) => string): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const [file, imported] of edges) {
    const [from, to] = [node(file), node(imported)];
    if (from !== to) graph.set(from, (graph.get(from) ?? new Set()).add(to));
  }
  return graph;
}

const folderGraph = () => graphOf(imports(), floorOf);

function findCycle(graph: Map<string, Set<string>>): string[] | null {
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (node: string): string[] | null => {
    if (path.includes(node)) return [...path.slice(path.indexOf(node)), node];
    if (done.has(node)) return null;
    path.push(node);
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    path.pop();
    done.add(node);
    return null;
  };
  for (const node of graph.keys()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return null;
}

describe("the folders of src/ form floors", () => {
  test("no two top-level folders import each other, directly or round a loop", () => {
    const graph = folderGraph();
    // Contrast: the graph is the real one (the HTTP layer reaches the dispatcher, which reaches the supervisor).
    expect(graph.get("api")).toContain("dispatch");
    expect(graph.get("dispatch")).toContain("supervisor");
    // The simulator reads the failure grammar the config checks, so it stands above config, never under it.
    expect(graph.get("simulator")).toContain("config");
    expect(findCycle(graph)).toBeNull();
  });

  test("contrast: a loop through three folders is found", () => {
    const graph = new Map([["a", new Set(["b"])], ["b", new Set(["c"])], ["c", new Set(["a"])]]);
    expect(findCycle(graph)).toEqual(["a", "b", "c", "a"]);
  });

  test("no two files import each other either, directly or round a loop", () => {
    const graph = graphOf(imports(), (file) => relative(SRC, file));
    // Contrast: the graph is the real one, file by file.
    expect(graph.get("supervisor/backends/local/local-backend.ts")).toContain("supervisor/placement.ts");
    expect(graph.get("supervisor/run.ts")).toContain("supervisor/placement.ts");
    expect(findCycle(graph)).toBeNull();
  });
});

const MAX_COLUMNS = 120;

// Every line of src/ (code, the status page, its inline script and style) fits 120 columns.
function longLines(files: Array<[path: string, text: string]>): string[] {
  return files.flatMap(([path, text]) =>
    text.split("\n").flatMap((line, i) => (line.length > MAX_COLUMNS ? [`${path}:${i + 1} (${line.length})`] : [])),
  );
}

describe("one voice", () => {
  test(`no line of src/ is longer than ${MAX_COLUMNS} columns`, () => {
    const files = readdirSync(SRC, { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".ts") || f.endsWith(".html"))
      .map((f): [string, string] => [relative(REPO, join(SRC, f)), readFileSync(join(SRC, f), "utf8")]);
    expect(files.length).toBeGreaterThan(50);
    expect(longLines(files)).toEqual([]);
  });

  test("contrast: a line one column too long is named with its place", () => {
    const text = `${"x".repeat(MAX_COLUMNS)}\n${"y".repeat(MAX_COLUMNS + 1)}\n`;
    expect(longLines([["src/a.ts", text]])).toEqual(["src/a.ts:2 (121)"]);
  });
});

