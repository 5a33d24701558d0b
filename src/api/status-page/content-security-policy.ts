// The page's only script and stylesheet are inline: allow exactly those bytes by hash, and nothing else.
export function contentSecurityPolicy(html: string): string {
  return [
    "default-src 'none'",
    `script-src ${hashesOf(html, "script")}`,
    `style-src ${hashesOf(html, "style")}`,
    "connect-src 'self'",
    "img-src data:",
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
