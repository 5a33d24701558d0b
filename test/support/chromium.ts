import { afterAll, beforeAll } from "bun:test";
// Headless Chromium (Debian's `chromium`) driven over the DevTools protocol on its own WebSocket:
// no browser download and no driver library. Chromium prints `DevTools listening on ws://…` on stderr
// once it is ready; every command is `{id, method, params, sessionId}` and is answered by the same id.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { waitFor } from "./wait.ts";

const KNOWN_PATHS = ["/usr/bin/chromium", "/usr/bin/chromium-browser"];
const LAUNCH_TIMEOUT_MS = 30_000;
const COMMAND_TIMEOUT_MS = 15_000;
const CLOSE_TIMEOUT_MS = 5_000;
export interface Viewport {
  width: number;
  height: number;
  /** Emulates a phone: the viewport meta tag applies, as on a handset. */
  mobile: boolean;
}
export const DESKTOP: Viewport = { width: 1280, height: 1000, mobile: false };
/** An iPhone 12–15's CSS viewport in portrait. */
export const PHONE: Viewport = { width: 390, height: 844, mobile: true };
const FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
  "--disable-dev-shm-usage", "--password-store=basic", "--hide-scrollbars", "--mute-audio",
  `--window-size=${DESKTOP.width},${DESKTOP.height}`, "--remote-debugging-port=0",
];

export const CHROMIUM_MISSING =
  "Chromium is not installed, and the status page is tested in a real headless Chromium: install Debian's package with `apt-get install -y chromium` (.ci/run does)";

type Message = { id?: number; method?: string; params?: any; sessionId?: string; result?: any; error?: { message: string } };

export interface Page {
  /** Runs `expression` in the page and returns its value (awaiting a promise); a page-side exception throws here. */
  evaluate<T = unknown>(expression: string): Promise<T>;
  /** Waits, with a deadline, until `expression` is truthy in the page, and returns that value. */
  until<T = unknown>(expression: string, what: string, timeoutMs?: number): Promise<NonNullable<T>>;
  focus(selector: string): Promise<void>;
  type(text: string): Promise<void>;
  pressEnter(): Promise<void>;
  reload(): Promise<void>;
  /** The viewport, or with `fullPage` the whole page as tall as its content. */
  screenshot(path: string, opts?: { fullPage?: boolean }): Promise<string>;
  /** Uncaught exceptions, console.error calls and error log entries but failed requests (CSP violations, say), in order. */
  errors: string[];
}

export interface Browser extends AsyncDisposable {
  open(url: string, viewport?: Viewport): Promise<Page>;
}

/** One Chromium for the tests of a file (or describe block): launched before the first, closed after the last. */
export function chromiumForTests(): Pick<Browser, "open"> {
  let browser: Browser | undefined;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 2 * LAUNCH_TIMEOUT_MS);
  afterAll(async () => {
    await browser?.[Symbol.asyncDispose]();
  });
  return { open: (url, viewport) => browser!.open(url, viewport) };
}

export function findChromium(): string | null {
  return Bun.which("chromium") ?? KNOWN_PATHS.find((p) => existsSync(p)) ?? null;
}

export async function launchChromium(): Promise<Browser> {
  const binary = findChromium();
  if (binary === null) throw new Error(CHROMIUM_MISSING);
  const profile = mkdtempSync(join(tmpdir(), "lora-worker-chromium-"));
  // Its own process group, so disposal also reaps the renderer and zygote processes.
  const proc = Bun.spawn([binary, ...FLAGS, `--user-data-dir=${profile}`, "about:blank"], { stdin: "ignore", stdout: "ignore", stderr: "pipe", detached: true });
  let stderr = "";
  void (async () => {
    for await (const chunk of proc.stderr) stderr += new TextDecoder().decode(chunk);
  })();
  const close = async () => {
    await waitFor(() => proc.exitCode !== null || proc.signalCode !== null, "chromium to exit", CLOSE_TIMEOUT_MS).catch(() => {});
    killGroup(proc.pid);
    await proc.exited;
    rmSync(profile, { recursive: true, force: true });
  };
  try {
    const endpoint = await waitFor(() => {
      if (proc.exitCode !== null) throw new Error(`chromium (${binary}) exited ${proc.exitCode} before it listened:\n${stderr}`);
      return /DevTools listening on (ws:\/\/\S+)/.exec(stderr)?.[1];
    }, "chromium's DevTools endpoint", LAUNCH_TIMEOUT_MS);
    const cdp = await connect(endpoint);
    return {
      open: (url, viewport = DESKTOP) => openPage(cdp, url, viewport),
      async [Symbol.asyncDispose]() {
        await cdp.send("Browser.close").catch(() => {});
        cdp.close();
        await close();
      },
    };
  } catch (error) {
    killGroup(proc.pid);
    await close();
    throw error;
  }
}

function killGroup(pid: number) {
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // ESRCH: nothing of the group is left.
  }
}

interface Connection {
  send(method: string, params?: object, sessionId?: string): Promise<any>;
  on(listener: (message: Message) => void): void;
  close(): void;
}

async function connect(url: string): Promise<Connection> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = () => reject(new Error(`could not open chromium's DevTools socket at ${url}`));
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void; method: string }>();
  const listeners: Array<(message: Message) => void> = [];
  ws.onmessage = (event) => {
    const message = JSON.parse(String(event.data)) as Message;
    const call = message.id === undefined ? undefined : pending.get(message.id);
    if (call === undefined) return listeners.forEach((listen) => listen(message));
    pending.delete(message.id!);
    if (message.error) call.reject(new Error(`${call.method}: ${message.error.message}`));
    else call.resolve(message.result);
  };
  ws.onclose = () => {
    for (const call of pending.values()) call.reject(new Error(`${call.method}: chromium closed the DevTools socket`));
    pending.clear();
  };
  return {
    send(method, params = {}, sessionId) {
      const id = nextId++;
      ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`${method}: no answer from chromium within ${COMMAND_TIMEOUT_MS} ms`)), COMMAND_TIMEOUT_MS);
        const settle = <T>(fn: (v: T) => void) => (v: T) => (clearTimeout(timer), fn(v));
        pending.set(id, { resolve: settle(resolve), reject: settle(reject), method });
      });
    },
    on: (listener) => void listeners.push(listener),
    close: () => ws.close(),
  };
}

async function openPage(cdp: Connection, url: string, viewport: Viewport): Promise<Page> {
  const { targetId } = await cdp.send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await cdp.send("Target.attachToTarget", { targetId, flatten: true });
  const send = (method: string, params?: object) => cdp.send(method, params, sessionId);
  const errors: string[] = [];
  let loads = 0;
  cdp.on((m) => {
    if (m.sessionId !== sessionId) return;
    if (m.method === "Page.loadEventFired") loads++;
    if (m.method === "Runtime.exceptionThrown") errors.push(describeException(m.params.exceptionDetails));
    if (m.method === "Runtime.consoleAPICalled" && m.params.type === "error") errors.push(`console.error: ${m.params.args.map((a: any) => a.value ?? a.description).join(" ")}`);
    // "network" entries are the API's own 401s and 503s, which the page handles.
    if (m.method === "Log.entryAdded" && m.params.entry.level === "error" && m.params.entry.source !== "network") errors.push(`${m.params.entry.source}: ${m.params.entry.text}${m.params.entry.url ? ` (${m.params.entry.url})` : ""}`);
  });
  await Promise.all([send("Page.enable"), send("Runtime.enable"), send("Log.enable")]);
  await send("Emulation.setDeviceMetricsOverride", { ...viewport, deviceScaleFactor: 1 });
  const navigate = async (action: () => Promise<any>) => {
    const before = loads;
    const answer = await action();
    if (answer?.errorText) throw new Error(`loading ${url}: ${answer.errorText}`);
    await waitFor(() => loads > before, `the load event of ${url}`);
  };
  await navigate(() => send("Page.navigate", { url }));

  const evaluate = async <T>(expression: string): Promise<T> => {
    const answer = await send("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true });
    if (answer.exceptionDetails) throw new Error(`in the page, ${expression}: ${describeException(answer.exceptionDetails)}`);
    return answer.result.value as T;
  };
  return {
    errors,
    evaluate,
    until: (expression, what, timeoutMs = 15_000) => waitFor(() => evaluate(expression), what, timeoutMs),
    focus: async (selector) => void (await evaluate(`document.querySelector(${JSON.stringify(selector)}).focus()`)),
    type: async (text) => void (await send("Input.insertText", { text })),
    async pressEnter() {
      const key = { key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
      await send("Input.dispatchKeyEvent", { type: "keyDown", text: "\r", ...key });
      await send("Input.dispatchKeyEvent", { type: "keyUp", ...key });
    },
    reload: () => navigate(() => send("Page.reload")),
    async screenshot(path, { fullPage = false } = {}) {
      const { cssContentSize: size } = await send("Page.getLayoutMetrics");
      const whole = { captureBeyondViewport: true, clip: { x: 0, y: 0, width: viewport.width, height: Math.ceil(size.height), scale: 1 } };
      const { data } = await send("Page.captureScreenshot", { format: "png", ...(fullPage ? whole : {}) });
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, Buffer.from(data, "base64"));
      return path;
    },
  };
}

function describeException(details: any): string {
  return details?.exception?.description ?? details?.text ?? JSON.stringify(details);
}
