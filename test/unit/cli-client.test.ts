import { describe, expect, test } from "bun:test";
import { jobEvents, SseParser, type JobEvent } from "../../src/cli/client/sse.ts";
import { LogStream } from "../../src/cli/client/commands/logs.ts";
import { createTerminal, type Terminal } from "../../src/cli/client/terminal.ts";
import { ClientError } from "../../src/cli/client/exit.ts";
import { createWorkerClient } from "../../src/cli/client/worker-client.ts";
import { urlOfListen } from "../support/listen.ts";
import { counted } from "../../src/counted.ts";
import { statusLines } from "../../src/cli/client/format.ts";
import type { JobView } from "../../src/cli/client/worker-client.ts";
import { JOB_VIEW_EXAMPLE } from "../../src/api/openapi.ts";

const JOB = "3f1c2a4e-0000-4000-8000-000000000000";
const FAST = { idleMs: 300, maxOutageMs: 2_000, firstRetryMs: 10, maxRetryMs: 50 };

function captured(isTTY: boolean): Terminal & { text(): string } {
  let text = "";
  const out = createTerminal({ stdout: (t) => void (text += t), stderr: () => {} }, { stdoutIsTTY: isTTY, stderrIsTTY: false, columns: 80 });
  return { ...out, text: () => text };
}

const view = (step: number, status = "training") => ({ worker_job_id: JOB, status, step });
const sse = (id: number, event: string, data: unknown) => `id: ${id}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

async function collect(events: AsyncGenerator<JobEvent>): Promise<string[]> {
  const seen: string[] = [];
  for await (const e of events) seen.push(e.kind === "heartbeat" ? "heartbeat" : `${e.kind}:${e.view.step}`);
  return seen;
}

describe("the SSE parser", () => {
  test("frames events across arbitrary chunk boundaries, a CRLF split in two included", () => {
    const stream = "id: 7\r\nevent: job\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: heartbeat\r\n\r\nretry: 900\nevent: end\rdata: x\r\r\n";
    const whole = new SseParser().push(stream);
    for (let cut = 1; cut < stream.length; cut++) {
      const parser = new SseParser();
      expect([...parser.push(stream.slice(0, cut)), ...parser.push(stream.slice(cut))]).toEqual(whole);
    }
    expect(whole).toEqual([
      { kind: "event", event: "job", data: '{"a":\n1}', id: "7" },
      { kind: "comment", text: "heartbeat" },
      { kind: "retry", ms: 900 },
      { kind: "event", event: "end", data: "x", id: "7" },
    ]);
  });
});

describe("the job event stream", () => {
  test("reconnects after a dropped connection with Last-Event-ID and ends at the end event", async () => {
    const lastIds: (string | null)[] = [];
    using server = Bun.serve({
      port: 0,
      fetch(req) {
        lastIds.push(req.headers.get("last-event-id"));
        const body = lastIds.length === 1 ? sse(1, "job", view(1)) : sse(2, "job", view(2)) + sse(3, "end", view(3, "succeeded"));
        return new Response(body, { headers: { "content-type": "text/event-stream" } });
      },
    });
    const client = createWorkerClient({ url: server.url.href.replace(/\/$/, ""), token: null });
    expect(await collect(jobEvents(client, JOB, FAST))).toEqual(["job:1", "job:2", "end:3"]);
    expect(lastIds).toEqual([null, "1"]);
  });

  test("a connection silent for longer than three heartbeats is dropped and reopened, where heartbeats keep it", async () => {
    let connections = 0;
    using server = Bun.serve({
      port: 0,
      fetch() {
        connections++;
        const first = connections === 1;
        const body = new ReadableStream({
          async start(controller) {
            controller.enqueue(new TextEncoder().encode(first ? sse(1, "job", view(1)) : ": heartbeat\n\n"));
            if (!first) {
              await Bun.sleep(FAST.idleMs / 2);
              controller.enqueue(new TextEncoder().encode(`: heartbeat\n\n${sse(2, "end", view(2, "succeeded"))}`));
              controller.close();
            }
          },
        });
        return new Response(body, { headers: { "content-type": "text/event-stream" } });
      },
    });
    const client = createWorkerClient({ url: server.url.href.replace(/\/$/, ""), token: null });
    expect(await collect(jobEvents(client, JOB, FAST))).toEqual(["job:1", "heartbeat", "heartbeat", "end:2"]);
    expect(connections).toBe(2);
  });

  test("a refusal is not retried: a 404 ends the stream as no such job", async () => {
    let connections = 0;
    using server = Bun.serve({ port: 0, fetch: () => (connections++, Response.json({ detail: "no such job" }, { status: 404 })) });
    const client = createWorkerClient({ url: server.url.href.replace(/\/$/, ""), token: null });
    const error = await collect(jobEvents(client, JOB, FAST)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect({ kind: (error as ClientError).kind, exitCode: (error as ClientError).exitCode, connections }).toEqual({ kind: "no_such_job", exitCode: 6, connections: 1 });
  });
});

describe("a live line redrawn on a terminal", () => {
  function sized(columns: number) {
    const shape = { stdoutIsTTY: true, stderrIsTTY: false, columns };
    let text = "";
    const out = createTerminal({ stdout: (t) => void (text += t), stderr: () => {} }, shape);
    return { out, shape, text: () => text };
  }

  test("clears every row a line wider than the window takes: one drawn before the window narrowed, or a long log line", () => {
    const term = sized(100);
    term.out.redraw("x".repeat(90));
    term.shape.columns = 40;
    term.out.redraw("short");
    term.out.write(`\n${"y".repeat(85)}`);
    term.out.redraw("bar");
    expect(term.text()).toBe(`\r\x1b[2K${"x".repeat(90)}\x1b[2A\r\x1b[Jshort\n${"y".repeat(85)}\x1b[2A\r\x1b[Jbar`);
  });

  test("a line that fits its window is cleared alone (the contrast)", () => {
    const term = sized(100);
    term.out.redraw("x".repeat(90));
    term.out.redraw("short");
    expect(term.text()).toBe(`\r\x1b[2K${"x".repeat(90)}\r\x1b[2Kshort`);
  });
});

describe("logs -f's view of the log's bytes", () => {
  // The worker's tail of the log below, and the bytes a read from its cursor (the start of its last line) answers.
  const tail = "loading\nepoch 1/1\nsteps:  10%| 40/400\n";
  const reads = ["\rsteps:   0%| 0/400\rsteps:  10%| 40/400", "", "\rsteps:  50%| 200/400\nsaving checkpoint: a.safetensors\n", "\rsteps: 100%| 400/400\n"];

  test("into a pipe, prints each line once and each new form of a bar still drawn as one more line", () => {
    const out = captured(false);
    const log = new LogStream(out);
    log.tail(tail);
    for (const bytes of reads) log.append(bytes);
    log.close();
    expect(out.text()).toBe("loading\nepoch 1/1\nsteps:  10%| 40/400\nsteps:  50%| 200/400\nsaving checkpoint: a.safetensors\nsteps: 100%| 400/400\n");
  });

  test("on a terminal, redraws the bar still drawn in place instead", () => {
    const out = captured(true);
    const log = new LogStream(out);
    log.tail(tail);
    for (const bytes of reads) log.append(bytes);
    log.close();
    expect(out.text()).toBe("loading\nepoch 1/1\nsteps:  10%| 40/400\r\x1b[2Ksteps:  50%| 200/400\nsaving checkpoint: a.safetensors\nsteps: 100%| 400/400\n");
  });

  test("into a pipe, a line split between two reads shows what came, then the whole line; a read ending in \\r shows nothing yet", () => {
    const out = captured(false);
    const log = new LogStream(out);
    for (const bytes of ["model sa", "ved.\n", "\r", "\rsteps: 1%\n", "\n"]) log.append(bytes);
    expect(out.text()).toBe("model sa\nmodel saved.\nsteps: 1%\n\n");
  });

  test("a notice goes to stderr, after the terminal ends the live bar; the bar then goes on on a line of its own", () => {
    let stdout = "";
    let stderr = "";
    const out = createTerminal({ stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) }, { stdoutIsTTY: true, stderrIsTTY: true, columns: 80 });
    const log = new LogStream(out);
    log.append("\rsteps: 1%");
    log.notice("cut\n");
    log.append("\rsteps: 2%\n");
    expect({ stdout, stderr }).toEqual({ stdout: "steps: 1%\nsteps: 2%\n", stderr: "cut\n" });
  });
});

test("a listen address is dialed on loopback when it binds every address, and not at all on port 0", () => {
  expect(["0.0.0.0:8203", "[::]:8203", "127.0.0.1:9", "[::1]:9", "gpu-box.lan:8203", "127.0.0.1:0"].map(urlOfListen)).toEqual([
    "http://127.0.0.1:8203",
    "http://[::1]:8203",
    "http://127.0.0.1:9",
    "http://[::1]:9",
    "http://gpu-box.lan:8203",
    null,
  ]);
});

describe("counts a person reads", () => {
  test("take the noun the count wants: 1 image, 0 and 2 images", () => {
    expect([0, 1, 2].map((n) => counted(n, "image"))).toEqual(["0 images", "1 image", "2 images"]);
  });

  test("lora-worker status's dataset line says 1 image and 1 caption, not 1 images", () => {
    const prepared = {
      captions: { trigger_added: 1, trigger_present: 2, images_without_caption: 1, cut: [], tokens_counted_by: "clip tokenizer" as const },
      turned_upright: [], small: [], duplicates: [],
    };
    const view = { ...JOB_VIEW_EXAMPLE, dataset: { files: 4, bytes: 1, sha256: "0".repeat(64), prepared } } as unknown as JobView;
    expect(statusLines(view, "http://w")).toContain("captions trigger added to 1 caption, already in 2, 1 image without one");
  });
});

describe("lora-worker status's likeness report", () => {
  const series = (distance: number | null, faces = distance === null ? 0 : 1) => ({ distance, faces, files: [] });
  const likeness = {
    threshold: 0.6, verdict: "overfit", reason: null, best_step: 200, best_sha256: "a".repeat(64),
    best_url: `/train/${JOB_VIEW_EXAMPLE.worker_job_id}/checkpoints/200`,
    points: [{ step: 200, trigger: series(0.31), class: series(0.82) }, { step: 400, trigger: series(0.28), class: series(0.5, 2) }],
  };

  test("prints each point's distances against the threshold, the verdict and the best step's LoRA", () => {
    const lines = statusLines({ ...JOB_VIEW_EXAMPLE, likeness } as unknown as JobView, "http://w");
    expect(lines.filter((l) => /^(likeness|verdict|best) |^ {9}step/.test(l) && !l.includes("/samples/"))).toEqual([
      "likeness step 200: trigger 0.31 (1 face), class 0.82 (1 face) (a match is at most 0.6)",
      "         step 400: trigger 0.28 (1 face), class 0.50 (2 faces) (a match is at most 0.6)",
      "verdict  overfit: the class-only previews show the person at the end",
      `best     step 200: http://w${likeness.best_url} (sha256 ${"a".repeat(64)})`,
    ]);
  });

  test("a run not scored says why, and one still running has no verdict yet", () => {
    const none = { ...likeness, points: [], verdict: "not_scored", reason: "no_face_in_previews", best_step: null };
    expect(statusLines({ ...JOB_VIEW_EXAMPLE, likeness: none } as unknown as JobView, "http://w"))
      .toContain("verdict  not_scored: no face in previews");
    // Contrast: a run without previews prints no likeness line at all.
    const plain = { ...none, reason: "no_previews" };
    expect(statusLines({ ...JOB_VIEW_EXAMPLE, likeness: plain } as unknown as JobView, "http://w").some((l) => l.startsWith("verdict"))).toBe(false);
    const running = { ...likeness, verdict: null };
    expect(statusLines({ ...JOB_VIEW_EXAMPLE, likeness: running } as unknown as JobView, "http://w").some((l) => l.startsWith("verdict"))).toBe(false);
  });
});
