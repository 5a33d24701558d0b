import { isIP } from "node:net";

// `listen` parsed once: serve binds host:port, doctor probes it, auth asks whether it is loopback, a client dials url.
export interface Listen {
  // As written in the config: what messages and /healthz quote.
  text: string;
  // Without IPv6 brackets: "::1", "0.0.0.0", "localhost".
  host: string;
  port: number;
  // As a client dials it (a wildcard bind is reached on loopback); null on port 0, which only the running worker knows.
  url: string | null;
  loopback: boolean;
}

// `text` has passed the schema's "host:port" pattern ("127.0.0.1:8203", "[::1]:8203", "localhost:8203").
export function parseListen(text: string): Listen {
  const at = text.lastIndexOf(":");
  const host = text.slice(0, at).replace(/^\[(.*)\]$/, "$1");
  const port = Number(text.slice(at + 1));
  return { text, host, port, url: port === 0 ? null : dialedUrl(host, port), loopback: isLoopback(host) };
}

function dialedUrl(host: string, port: number): string {
  const dialed = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return `http://${dialed.includes(":") ? `[${dialed}]` : dialed}:${port}`;
}

function isLoopback(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  if (isIP(host) === 6) return host === "::1" || /^::ffff:127\./.test(host);
  return false;
}
