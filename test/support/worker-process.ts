import { signalGroup, waitGroupGone } from "../../src/os/terminate.ts";
import { assertOwnTokenFiles, MAIN } from "./host-tree.ts";
import { waitFor } from "./wait.ts";

export interface WorkerProcess extends AsyncDisposable {
  url: string;
  proc: ReturnType<typeof Bun.spawn>;
  output(): string;
  request(path: string, init?: RequestInit): Promise<Response>;
  json(path: string, init?: RequestInit): Promise<{ status: number; body: any }>;
  postTrain(body: unknown): Promise<{ status: number; body: any }>;
}

// A SIGKILL lands when the kernel gets to each process of the group, which can be after the leader's exit.
const GROUP_GONE_MS = 15_000;

// A real worker process (from source, or the compiled binary) on an ephemeral port.
export async function startWorker(configPath: string, opts: { command?: string[]; env?: Record<string, string> } = {}): Promise<WorkerProcess> {
  assertOwnTokenFiles(configPath);
  const command = opts.command ?? [process.execPath, MAIN];
  // A process group of its own, which the end kills whole: a wrapper (`runuser -u USER -- …`) does not pass its
  // SIGKILL on, and the worker under it lived on after its test (as that user, for as long as the host ran).
  const proc = Bun.spawn([...command, "serve", "--config", configPath], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...opts.env },
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
  let out = "";
  void (async () => {
    for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  void (async () => {
    for await (const chunk of proc.stderr as ReadableStream<Uint8Array>) out += new TextDecoder().decode(chunk);
  })();
  const url = await waitFor(() => {
    if (proc.exitCode !== null) throw new Error(`worker exited ${proc.exitCode}: ${out}`);
    return /"msg":"listening","url":"([^"]+)"/.exec(out)?.[1];
  }, "the worker to listen");
  const request = (path: string, init?: RequestInit) => fetch(url + path, init);
  const json = async (path: string, init?: RequestInit) => {
    const res = await request(path, init);
    return { status: res.status, body: await res.json() };
  };
  return {
    url,
    proc,
    output: () => out,
    request,
    json,
    postTrain: (body) => json("/train", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }),
    async [Symbol.asyncDispose]() {
      signalGroup(proc.pid, "SIGKILL");
      await proc.exited;
      if (!(await waitGroupGone(proc.pid, GROUP_GONE_MS))) throw new Error(`the worker's group ${proc.pid} outlived SIGKILL`);
    },
  };
}
