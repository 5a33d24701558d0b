import type { Listen } from "./schema.ts";

/** Why an address could not be bound, in words, with what to do: serve's refusal and doctor's port check say it. */
export interface BindFailure {
  /** The errno's name as Bun reports it ("EADDRINUSE"), or the error's message when it has none. */
  code: string;
  cause: string;
  fix: string;
}

// Read from the error Bun.serve or Bun.listen throws: `code` holds the errno's name for a failed bind.
export function bindFailure(listen: Listen, error: unknown): BindFailure {
  const raw = (error as { code?: unknown } | null)?.code;
  const code = typeof raw === "string" ? raw : String((error as Error)?.message ?? error);
  const find = `find it with: ss -ltnp 'sport = :${listen.port}'`;
  switch (code) {
    case "EADDRINUSE":
      return { code, cause: "the address is in use by another program", fix: `${find}; stop it or change listen` };
    case "EACCES":
      return {
        code,
        cause: `permission denied: port ${listen.port} is below net.ipv4.ip_unprivileged_port_start and the ` +
          "service user may not bind it (the unit grants no CAP_NET_BIND_SERVICE)",
        fix: "change listen to a port of 1024 or above",
      };
    case "EADDRNOTAVAIL":
      return {
        code,
        cause: `no interface of this host has the address ${listen.host}`,
        fix: "change listen to an address of this host (ip -brief address lists them), or 0.0.0.0",
      };
    default:
      return { code, cause: code, fix: "check that listen names an address of this host and a free port" };
  }
}
