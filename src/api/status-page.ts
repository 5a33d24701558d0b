import { Hono } from "hono";
import page from "./status-page.html" with { type: "text" };

// bun-types declares every *.html import an HTMLBundle; with { type: "text" } Bun hands over the file's text.
const PAGE = page as unknown as string;

const HEADERS = {
  "Content-Security-Policy": contentSecurityPolicy(PAGE),
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-cache",
};

// `GET /`: the status page, one self-contained document; every call it makes goes through the API's own auth.
export function statusPageRoutes() {
  return new Hono().get("/", (c) => c.html(PAGE, 200, HEADERS));
}

// The page's only script and stylesheet are inline: allow exactly those bytes by hash, and nothing else.
function contentSecurityPolicy(html: string): string {
  return [
    "default-src 'none'",
    `script-src ${hashesOf(html, "script")}`,
    `style-src ${hashesOf(html, "style")}`,
    "connect-src 'self'",
    // blob: for the preview samples, which the page fetches with the token and shows as object URLs.
    "img-src data: blob:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

function hashesOf(html: string, tag: "script" | "style"): string {
  const blocks = [...html.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g"))].map((m) => m[1] ?? "");
  if (blocks.length === 0) throw new Error(`the status page has no inline <${tag}>`);
  return blocks.map((body) => `'sha256-${new Bun.CryptoHasher("sha256").update(body).digest("base64")}'`).join(" ");
}
