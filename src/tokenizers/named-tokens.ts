// The tokens a tokenizer folder names outside vocab.json, which CLIPTokenizer.from_pretrained reads too: added tokens
// (added_tokens.json, tokenizer_config.json's added_tokens_decoder) with their ids, and the special tokens (bos, eos,
// unk, pad in special_tokens_map.json and tokenizer_config.json). One that vocab.json lacks becomes an id past CLIP's
// 49408, which the text encoders cannot embed; one given another id than vocab.json's changes what it stands for.

const SPECIAL_KEYS = ["bos_token", "eos_token", "unk_token", "pad_token"];

/** The texts of the files that name tokens; a file that is not there is undefined. */
export interface NamingFiles {
  added: string | undefined;
  config: string;
  special: string | undefined;
}

/** A token a file names, and the id it gives it (null where only the token's presence is required). */
export interface NamedToken {
  token: string;
  id: number | null;
  file: string;
}

/** Every token the files name; or which of them is unreadable. */
export function namedTokens(files: NamingFiles): NamedToken[] | string {
  const [added, config, special] = [files.added ?? "{}", files.config, files.special ?? "{}"].map(parseObject);
  const names = ["added_tokens.json", "tokenizer_config.json", "special_tokens_map.json"] as const;
  const unreadable = [added, config, special].findIndex((o) => o === null);
  if (unreadable >= 0) return `${names[unreadable]} is not a JSON object`;
  const specials = (o: Record<string, unknown>, file: string): NamedToken[] => SPECIAL_KEYS
    .map((key) => contentOf(o[key]))
    .filter((token) => token !== null)
    .map((token) => ({ token, id: null, file }));
  const given = (entries: [string, unknown][], file: string): NamedToken[] =>
    entries.map(([token, id]) => ({ token, id: Number.isInteger(id) ? (id as number) : NaN, file }));
  return [
    ...specials(special!, names[2]),
    ...specials(config!, names[1]),
    ...given(Object.entries(added!), names[0]),
    ...given(decoderEntries(config!.added_tokens_decoder), `${names[1]}'s added_tokens_decoder`),
  ];
}

// A special token is written as the token, or as an AddedToken's {"content": token, …}.
function contentOf(value: unknown): string | null {
  if (typeof value === "string") return value;
  const content = (value as { content?: unknown } | null | undefined)?.content;
  return typeof content === "string" ? content : null;
}

function decoderEntries(decoder: unknown): [string, number][] {
  if (typeof decoder !== "object" || decoder === null) return [];
  return Object.entries(decoder).flatMap(([id, token]): [string, number][] => {
    const content = contentOf(token);
    return content === null ? [] : [[content, Number(id)]];
  });
}

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    const isObject = typeof value === "object" && value !== null && !Array.isArray(value);
    return isObject ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
