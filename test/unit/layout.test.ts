import { describe, expect, test } from "bun:test";
import * as ts from "typescript";
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
    [...readFileSync(file, "utf8").matchAll(/(?:from |import\()"(\.[^"]+)"/g)].map(([, spec]): [string, string] => [file, resolve(dirname(file), spec!)]));
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

// The floors as docs/development.md's layout table lists them, top to bottom: one row a floor, its folders (and
// the root's files, one floor) named in its first cell.
function documentedFloors(): Map<string, number> {
  const doc = readFileSync(join(REPO, "docs/development.md"), "utf8");
  const table = doc.slice(doc.indexOf("## Layout"), doc.indexOf("### One request"));
  const rows = table.split("\n").filter((line) => line.startsWith("| `")).map((line) => line.split("|")[1]!);
  const floors = new Map<string, number>();
  rows.forEach((cell, i) => {
    for (const [, name] of cell.matchAll(/`([^`]+)`/g)) {
      const floor = name!.endsWith("/") ? name!.slice(0, -1) : name === "main.ts" ? "(main)" : "(root)";
      floors.set(floor, i);
    }
  });
  return floors;
}

// Each import from one folder to another that does not point down the documented floors, or names a folder the
// table does not list.
function againstFloors(edges: Array<[string, string]>, floors: Map<string, number>): string[] {
  return edges.flatMap(([file, imported]) => {
    const [from, to] = [floorOf(file), floorOf(imported)];
    if (from === to || !imported.startsWith(SRC)) return [];
    const [above, below] = [floors.get(from), floors.get(to)];
    if (above === undefined || below === undefined) return [`${from} or ${to} is not in the layout table`];
    return below > above ? [] : [`${relative(SRC, file)} -> ${relative(SRC, imported)}`];
  });
}

describe("the floors are the ones docs/development.md gives", () => {
  test("every import between folders points down the layout table", () => {
    const floors = documentedFloors();
    // Contrast: the table is read: the HTTP layer stands above the store, and every folder of src/ is in it.
    expect(floors.get("api")!).toBeLessThan(floors.get("store")!);
    const folders = readdirSync(SRC, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect(folders.filter((f) => !floors.has(f))).toEqual([]);
    expect(againstFloors(imports(), floors)).toEqual([]);
  });

  test("contrast: an import up the table, or between two folders of one row, is named", () => {
    const floors = new Map([["api", 0], ["store", 1], ["gpu", 2], ["auth", 2]]);
    const edge = (a: string, b: string): [string, string] => [join(SRC, a), join(SRC, b)];
    const edges = [edge("api/a.ts", "store/b.ts"), edge("store/b.ts", "api/a.ts"), edge("gpu/c.ts", "auth/d.ts")];
    expect(againstFloors(edges, floors)).toEqual(["store/b.ts -> api/a.ts", "gpu/c.ts -> auth/d.ts"]);
  });
});

// What the client commands may import besides their own folder: the wire's shapes, the job's vocabulary and
// tiers, the option parser, the token file, tqdm's framing of a log line, text made safe for a terminal, and for
// the smoke run's local checks its dataset and LoRA checks and the handoff root's walk. Never the worker's insides.
const CLIENT_MAY_IMPORT = [
  "api/openapi.ts", "job.ts", "tiers.ts", "fs.ts", "pinned-dir.ts", "printable.ts", "counted.ts", "cli/args.ts",
  "auth/tokens.ts",
  "progress/", "smoke/",
  // On the worker's own host the client reads the worker's config for its address and token, as serve does.
  "config/load.ts",
];

function clientReachesInside(edges: Array<[string, string]>): string[] {
  const client = join(SRC, "cli/client") + "/";
  return edges.flatMap(([file, imported]) => {
    if (!file.startsWith(client) || imported.startsWith(client) || !imported.startsWith(SRC)) return [];
    const target = relative(SRC, imported);
    return CLIENT_MAY_IMPORT.some((ok) => (ok.endsWith("/") ? target.startsWith(ok) : target === ok))
      ? []
      : [`${relative(SRC, file)} -> ${target}`];
  });
}

// The rest of the worker reaches supervisor/ through its one face.
const SUPERVISOR_FACE = "supervisor/index.ts";

function reachesPastSupervisorFace(edges: Array<[string, string]>): string[] {
  const inside = join(SRC, "supervisor") + "/";
  return edges.flatMap(([file, imported]) => {
    if (file.startsWith(inside) || !imported.startsWith(inside)) return [];
    const target = relative(SRC, imported);
    return target === SUPERVISOR_FACE ? [] : [`${relative(SRC, file)} -> ${target}`];
  });
}

describe("the faces the docs claim", () => {
  test("cli/client/ speaks to the worker only over the wire", () => {
    const edges = imports();
    // Contrast: the client's files are read, and they do import the wire's shapes.
    expect(edges.some(([f, i]) => f.includes("/cli/client/") && i.endsWith("api/openapi.ts"))).toBe(true);
    expect(clientReachesInside(edges)).toEqual([]);
  });

  test("contrast: a client file that reaches the supervisor is named", () => {
    const edge: [string, string] = [join(SRC, "cli/client/commands/logs.ts"), join(SRC, "supervisor/job-log.ts")];
    expect(clientReachesInside([edge])).toEqual(["cli/client/commands/logs.ts -> supervisor/job-log.ts"]);
  });

  test("outside code reaches supervisor/ only through supervisor/index.ts", () => {
    const edges = imports();
    // Contrast: outside code does import the supervisor, through its face.
    const outside = edges.filter(([f, i]) => !f.includes("/supervisor/") && i.includes("/supervisor/"));
    expect(outside.length).toBeGreaterThan(5);
    expect(reachesPastSupervisorFace(edges)).toEqual([]);
  });

  test("contrast: a route that imports a supervisor file past its face is named", () => {
    const edge: [string, string] = [join(SRC, "api/job-view.ts"), join(SRC, "supervisor/run.ts")];
    const inside: [string, string] = [join(SRC, "supervisor/run.ts"), join(SRC, "supervisor/run-end.ts")];
    expect(reachesPastSupervisorFace([edge, inside])).toEqual(["api/job-view.ts -> supervisor/run.ts"]);
  });

  // test/unit/ is the tier that runs nothing but the code: no worker, no CLI, no child process.
  const STARTS_A_PROCESS = /Bun\.spawn|spawnSync|node:child_process|startWorker|runCli|spawnCli|process\.execPath/;
  const startsAProcess = (text: string) => STARTS_A_PROCESS.test(text);

  test("test/unit/ starts no process", () => {
    const dir = join(REPO, "test/unit");
    // This file names the calls to find them.
    const files = readdirSync(dir).filter((f) => f.endsWith(".ts") && f !== "layout.test.ts");
    expect(files.length).toBeGreaterThan(10);
    expect(files.filter((f) => startsAProcess(readFileSync(join(dir, f), "utf8")))).toEqual([]);
  });

  test("contrast: a unit test that spawns is found", () => {
    expect(startsAProcess('const p = Bun.spawn(["true"]);')).toBe(true);
    expect(startsAProcess('import { execFile } from "node:child_process";')).toBe(true);
    expect(startsAProcess("expect(1).toBe(1);")).toBe(false);
  });
});

const MAX_COLUMNS = 120;

// Every line of src/ (code, the status page, its inline script and style) fits 120 columns.
function longLines(files: Array<[path: string, text: string]>): string[] {
  return files.flatMap(([path, text]) =>
    text.split("\n").flatMap((line, i) => (line.length > MAX_COLUMNS ? [`${path}:${i + 1} (${line.length})`] : [])),
  );
}

// Each member comment of an interface in the other voice: an exported one's read by editors (/** */), a file's
// own interfaces' only by the next reader (//).
function offVoice(path: string, text: string): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const lines = text.split("\n");
  return file.statements.filter(ts.isInterfaceDeclaration).flatMap((decl) => {
    const exported = decl.modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword) ?? false;
    return decl.members.flatMap((member) => {
      const above = file.getLineAndCharacterOfPosition(member.getStart()).line - 1;
      const line = lines[above] ?? "";
      if (exported && /^\s*\/\//.test(line)) return [`${path}:${above + 1} (// in an exported interface)`];
      if (!exported && /^\s*\/\*\*/.test(line)) return [`${path}:${above + 1} (/** */ in a local one)`];
      return [];
    });
  });
}

describe("one voice", () => {
  test(`no line of src/ is longer than ${MAX_COLUMNS} columns`, () => {
    const files = readdirSync(SRC, { recursive: true, encoding: "utf8" })
      .filter((f) => f.endsWith(".ts") || f.endsWith(".html"))
      .map((f): [string, string] => [relative(REPO, join(SRC, f)), readFileSync(join(SRC, f), "utf8")]);
    expect(files.length).toBeGreaterThan(50);
    expect(longLines(files)).toEqual([]);
  });

  test("an exported interface's members are documented with /** */, a file's own interfaces' with //", () => {
    const files = readdirSync(SRC, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
    const found = files.flatMap((f) => offVoice(relative(REPO, join(SRC, f)), readFileSync(join(SRC, f), "utf8")));
    expect(found).toEqual([]);
  });

  test("contrast: a // member of an exported interface and a /** */ member of a local one are named", () => {
    const text = "export interface A {\n  // why\n  a: number;\n}\ninterface B {\n  /** why */\n  b: number;\n}\n";
    expect(offVoice("src/x.ts", text)).toEqual(["src/x.ts:2 (// in an exported interface)", "src/x.ts:6 (/** */ in a local one)"]);
  });

  test("contrast: a line one column too long is named with its place", () => {
    const text = `${"x".repeat(MAX_COLUMNS)}\n${"y".repeat(MAX_COLUMNS + 1)}\n`;
    expect(longLines([["src/a.ts", text]])).toEqual(["src/a.ts:2 (121)"]);
  });
});

