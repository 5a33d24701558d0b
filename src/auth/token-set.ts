import { createHash, timingSafeEqual } from "node:crypto";

export interface TokenSet {
  matches(presented: string): boolean;
  readonly size: number;
}

// Both sides are hashed first: equal-length digests make timingSafeEqual usable and hide the token's length.
export function tokenSet(tokens: readonly string[]): TokenSet {
  const digests = tokens.map(digest);
  return {
    size: digests.length,
    matches(presented) {
      const candidate = digest(presented);
      let found = false;
      for (const d of digests) found = timingSafeEqual(d, candidate) || found;
      return found;
    },
  };
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}
