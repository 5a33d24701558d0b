import { isIP } from "node:net";

// The host part of `listen` ("127.0.0.1:8203", "[::1]:8203", "localhost:8203").
export function listenHost(listen: string): string {
  return listen.slice(0, listen.lastIndexOf(":")).replace(/^\[(.*)\]$/, "$1");
}

export function isLoopbackListen(listen: string): boolean {
  const host = listenHost(listen).toLowerCase();
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  if (isIP(host) === 6) return host === "::1" || /^::ffff:127\./.test(host);
  return false;
}
