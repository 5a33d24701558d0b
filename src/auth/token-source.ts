import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { parseTokenLines, type TokenLines } from "./token-lines.ts";

export interface TokenSource {
  kind: "systemd-credential" | "token-file";
  path: string;
}

export const CREDENTIAL_NAME = "token";

export type Located = { ok: true; source: TokenSource | null } | { ok: false; error: string };

// systemd's LoadCredential= wins over auth.token_file: the unit hands this credential to this service on purpose.
export function locateTokenSource(tokenFile: string, credentialsDirectory: string | undefined): Located {
  const candidates: TokenSource[] = [
    ...(credentialsDirectory ? [{ kind: "systemd-credential" as const, path: join(credentialsDirectory, CREDENTIAL_NAME) }] : []),
    { kind: "token-file", path: tokenFile },
  ];
  for (const candidate of candidates) {
    const presence = presenceOf(candidate.path);
    if (presence === "present") return { ok: true, source: candidate };
    if (presence !== "absent") return { ok: false, error: `cannot check ${candidate.path} (${presence}); a token source that cannot be read is not treated as absent` };
  }
  return { ok: true, source: null };
}

export function readTokenSource(source: TokenSource): TokenLines {
  try {
    return parseTokenLines(readFileSync(source.path, "utf8"), source.path);
  } catch (err) {
    return { ok: false, errors: [`cannot read ${source.path} (${(err as NodeJS.ErrnoException).code ?? "error"})`] };
  }
}

function presenceOf(path: string): "present" | "absent" | string {
  try {
    statSync(path);
    return "present";
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    return code === "ENOENT" || code === "ENOTDIR" ? "absent" : code;
  }
}
