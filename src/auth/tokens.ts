import { timingSafeEqual } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../logger.ts";
import { fail, ok, type Result } from "../result.ts";

// A token file: one token a line; blank lines and `#` comments ignored; several tokens valid at once.
const MIN_TOKEN_LENGTH = 16;
const TOKEN_CHARS = /^[A-Za-z0-9._~+/-]+=*$/; // RFC 6750 b64token: what fits in "Authorization: Bearer"

// The tokens of a source, or every problem with it.
type TokenLines = Result<string[], string[]>;

// Errors name the line, never its content: a bad line may still be a secret.
export function parseTokenLines(text: string, source: string): TokenLines {
  const tokens: string[] = [];
  const errors: string[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const where = `${source} line ${i + 1}`;
    if (!TOKEN_CHARS.test(line)) {
      errors.push(`${where}: a token may hold only A-Z a-z 0-9 . _ ~ + / - (and trailing =), with no spaces`);
    } else if (line.length < MIN_TOKEN_LENGTH) {
      errors.push(`${where}: a token must be at least ${MIN_TOKEN_LENGTH} characters`);
    } else tokens.push(line);
  });
  if (errors.length > 0) return fail(errors);
  if (tokens.length === 0) return fail([`${source} holds no token (only blank lines or comments)`]);
  return ok(tokens);
}

export interface TokenSet {
  matches(presented: string): boolean;
  /** As matches, without looking for a changed file first. */
  holds(presented: string): boolean;
  readonly size: number;
}

// Both sides are hashed first: equal-length digests make timingSafeEqual usable and hide the token's length.
function tokenSet(tokens: readonly string[]): TokenSet {
  const digests = tokens.map(digest);
  const holds = (presented: string) => {
    const candidate = digest(presented);
    let found = false;
    for (const d of digests) found = timingSafeEqual(d, candidate) || found;
    return found;
  };
  return { size: digests.length, matches: holds, holds };
}

// Bun's one-shot SHA-256: a fifth of createHash's cost, paid by every authenticated request.
function digest(token: string): Uint8Array {
  return Bun.SHA256.hash(token) as Uint8Array;
}

export interface TokenSource {
  kind: "systemd-credential" | "token-file";
  path: string;
}

/** The systemd credential of each kind of token: `token` for the tokens that may act, `read-token` for readers. */
export const CREDENTIAL_NAMES = { full: "token", read: "read-token" } as const;

// null: no source exists, which is not an error.
type Located = Result<TokenSource | null>;

// systemd's LoadCredential= wins over the config's file: the unit hands this credential to this service on purpose.
export function locateTokenSource(
  tokenFile: string,
  credentialsDirectory: string | undefined,
  credential: string = CREDENTIAL_NAMES.full,
): Located {
  const fromSystemd: TokenSource[] = credentialsDirectory
    ? [{ kind: "systemd-credential", path: join(credentialsDirectory, credential) }]
    : [];
  const candidates: TokenSource[] = [...fromSystemd, { kind: "token-file", path: tokenFile }];
  for (const candidate of candidates) {
    const presence = presenceOf(candidate.path);
    if (presence === "present") return ok(candidate);
    if (presence !== "absent") {
      return fail(
        `cannot check ${candidate.path} (${presence}); a token source that cannot be read is not treated as absent`,
      );
    }
  }
  return ok(null);
}

export function readTokenSource(source: TokenSource): TokenLines {
  try {
    return parseTokenLines(readFileSync(source.path, "utf8"), source.path);
  } catch (err) {
    return fail([`cannot read ${source.path} (${(err as NodeJS.ErrnoException).code ?? "error"})`]);
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

// A stat per request would cost more than the rest of the auth check; a rotation takes effect within this.
export const TOKEN_CHECK_MS = 1000;

/** What a reload does with a file gone or broken, and with a set it may not take. */
export interface ReloadPolicy {
  /** "keep": the last good tokens stay valid; "revoke": none is (removing the file revokes, and nothing widens). */
  onLoss: "keep" | "revoke";
  /** Why tokens read again may not be taken (one the other file holds), or null. */
  refuse?: (tokens: readonly string[]) => string | null;
}

const KEEP: ReloadPolicy = { onLoss: "keep" };

// Rotation without a restart: a changed file is read again (looked at no more than once a TOKEN_CHECK_MS); what a
// change that breaks it, or removes it, does is the policy's.
export function reloadingTokens(
  source: TokenSource,
  initial: readonly string[],
  log: Logger,
  policy: ReloadPolicy = KEEP,
  clock: () => number = () => performance.now(),
): TokenSet {
  let current = tokenSet(initial);
  let seen = fingerprint(source.path);
  let checkedAt = clock();
  const fields = { token_source: source.kind, token_path: source.path };
  const lost = (why: string, errors: string[]) => {
    if (policy.onLoss === "keep") {
      return log.error("auth token change ignored; the previous tokens stay valid", { ...fields, errors });
    }
    current = tokenSet([]);
    log.error(`auth tokens revoked: the ${why}; none of its tokens is valid until it is fixed`, { ...fields, errors });
  };
  const refresh = () => {
    const at = clock();
    if (at - checkedAt < TOKEN_CHECK_MS) return;
    checkedAt = at;
    const now = fingerprint(source.path);
    if (now === seen) return;
    seen = now;
    if (now === "missing:ENOENT" && policy.onLoss === "revoke") return lost("file was removed", []);
    const read = readTokenSource(source);
    if (!read.ok) return lost("file changed and cannot be used", read.error);
    const refused = policy.refuse?.(read.value) ?? null;
    if (refused !== null) return lost("file changed and was refused", [refused]);
    current = tokenSet(read.value);
    log.info("auth tokens reloaded", { ...fields, tokens: read.value.length });
  };
  return {
    get size() {
      return current.size;
    },
    matches(presented) {
      refresh();
      return current.matches(presented);
    },
    holds: (presented) => current.holds(presented),
  };
}

function fingerprint(path: string): string {
  try {
    const st = statSync(path);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch (err) {
    return `missing:${(err as NodeJS.ErrnoException).code}`;
  }
}
