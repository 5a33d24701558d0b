// A token file: one token a line; blank lines and `#` comments ignored; several tokens valid at once.
export const MIN_TOKEN_LENGTH = 16;
const TOKEN_CHARS = /^[A-Za-z0-9._~+/-]+=*$/; // RFC 6750 b64token: what fits in "Authorization: Bearer"

export type TokenLines = { ok: true; tokens: string[] } | { ok: false; errors: string[] };

// Errors name the line, never its content: a bad line may still be a secret.
export function parseTokenLines(text: string, source: string): TokenLines {
  const tokens: string[] = [];
  const errors: string[] = [];
  text.split("\n").forEach((raw, i) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    if (!TOKEN_CHARS.test(line)) errors.push(`${source} line ${i + 1}: a token may hold only A-Z a-z 0-9 . _ ~ + / - (and trailing =), with no spaces`);
    else if (line.length < MIN_TOKEN_LENGTH) errors.push(`${source} line ${i + 1}: a token must be at least ${MIN_TOKEN_LENGTH} characters`);
    else tokens.push(line);
  });
  if (errors.length > 0) return { ok: false, errors };
  if (tokens.length === 0) return { ok: false, errors: [`${source} holds no token (only blank lines or comments)`] };
  return { ok: true, tokens };
}
