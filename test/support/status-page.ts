import { cpSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser, Page, Viewport } from "./chromium.ts";
import { REPO, type HostTree } from "./host-tree.ts";
import type { WorkerProcess } from "./worker-process.ts";

// What the status-page tests share: the GPU scenario, opening the page, screenshots and the overflow check.
const SCREENSHOTS = join(tmpdir(), "lora-worker-status-page");
export const TTS = "python3 /opt/tts/server.py";
export const HOSTILE_NAME = "<img src=x onerror=window.__pwned=1>";

// SPEC §1's two cards, the TTS co-tenant on the 3090, and a process whose name is markup.
export function gpuScenario(tree: HostTree): string {
  const dir = join(tree.root, "gpu-scenario");
  cpSync(join(REPO, "test/fixtures/gpu/two-gpus-tts"), dir, { recursive: true });
  const apps = [`GPU-5e1c0a3b-7d24-4f89-b6a1-3c9e2f0d8b71, 48213, ${TTS}, 3000`, `GPU-a4f7d2e9-1b38-4c56-9e0f-7d2a8b3c6e15, 51234, ${HOSTILE_NAME}, 512`];
  writeFileSync(join(dir, "compute-apps.csv"), `${apps.join("\n")}\n`);
  return dir;
}

export async function openStatusPage(browser: Pick<Browser, "open">, worker: WorkerProcess, viewport?: Viewport): Promise<Page> {
  const res = await worker.request("/");
  if (res.status !== 200) throw new Error(`GET / answered ${res.status}: this dist/lora-worker does not serve the status page (publicly); rebuild it with \`bun run build\``);
  return browser.open(`${worker.url}/`, viewport);
}

export async function saveScreenshot(page: Page, name: string, opts?: { fullPage?: boolean }): Promise<void> {
  console.log(`status page screenshot: ${await page.screenshot(join(SCREENSHOTS, `${name}.png`), opts)}`);
}

/** Evaluated in the page: each shown element whose content is wider than its box or that sticks out of its parent, and a page that scrolls sideways. */
export const OVERFLOWS = `(() => {
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + [...e.classList].map((c) => "." + c).join("");
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth) problems.push("the page scrolls sideways: " + root.scrollWidth + " px in " + root.clientWidth);
  for (const e of document.body.querySelectorAll("*")) {
    if (e instanceof SVGElement || e.getClientRects().length === 0) continue;
    const text = JSON.stringify(e.textContent.trim().slice(0, 40));
    if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1) problems.push(name(e) + " holds " + e.scrollWidth + " px in " + e.clientWidth + ": " + text);
    const box = e.getBoundingClientRect();
    const outer = e.parentElement.getBoundingClientRect();
    if (box.left < outer.left - 1 || box.right > outer.right + 1) problems.push(name(e) + " sticks out of " + name(e.parentElement) + ": " + text);
  }
  return problems;
})()`;
