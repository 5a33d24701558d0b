import { statSync } from "node:fs";
import type { Logger } from "../log/logger.ts";
import { readTokenSource, type TokenSource } from "./token-source.ts";
import { tokenSet, type TokenSet } from "./token-set.ts";

// Rotation without a restart: a changed file is read again; a change that breaks it keeps the last good set.
export function reloadingTokens(source: TokenSource, initial: readonly string[], log: Logger): TokenSet {
  let current = tokenSet(initial);
  let seen = fingerprint(source.path);
  const refresh = () => {
    const now = fingerprint(source.path);
    if (now === seen) return;
    seen = now;
    const read = readTokenSource(source);
    if (read.ok) {
      current = tokenSet(read.tokens);
      log.info("auth tokens reloaded", { token_source: source.kind, token_path: source.path, tokens: read.tokens.length });
    } else {
      log.error("auth token change ignored; the previous tokens stay valid", { token_path: source.path, errors: read.errors });
    }
  };
  return {
    get size() {
      return current.size;
    },
    matches(presented) {
      refresh();
      return current.matches(presented);
    },
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
