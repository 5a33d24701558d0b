// What ftfy 6.3.1's fix_text, with its defaults, does to a caption before CLIPTokenizer splits it (sd-scripts' venv
// has ftfy, so transformers' CLIPTokenizer runs it on every caption): the fixes that change the tokens CLIP reads,
// each line by itself, over and over until none changes the text (fix_and_explain's loop). Not made: the mojibake
// repair (fix_encoding), a heuristic over ftfy's own tables: UTF-8 spelt in another encoding's letters ("cafÃ©") is
// counted as written, at or above what CLIP reads on every such caption recorded (test/fixtures/clip/SOURCES.md);
// and fix_line_breaks, since CLIP's whitespace_clean makes every line break one space either way.
import ENTITIES from "./html-entities.json" with { type: "json" };

// A Map, so that "&constructor;" is looked up among the entities and not in Object's prototype.
const NAMED: ReadonlyMap<string, string> = new Map(Object.entries(ENTITIES));
// ftfy's HTML_ENTITY_RE: only references that end in ";" (so "this&not that" stays).
const ENTITY = /&#?[0-9A-Za-z]{1,24};/g;
// Python's html.unescape for a numeric reference: its replacements of C1 and NUL, then "no such character".
const CP1252 = new TextDecoder("windows-1252");
const TERMINAL_ESCAPE = /\x1b\[(?:\p{Nd}|;)*[a-zA-Z]/gu;
const C1 = /[\x80-\x9f]/g;
const SINGLE_QUOTE = /[\u02bc\u2018-\u201b]/g;
const DOUBLE_QUOTE = /[\u201c-\u201f]/g;
// remove_control_chars: C0 but tab and the line breaks, DEL, the deprecated Arabic controls, the BOM, U+FFF9-FFFC.
const CONTROL = /[\x00-\x08\x0b\x0e-\x1f\x7f\u206a-\u206f\ufeff\ufff9-\ufffc]/g;
// fix_latin_ligatures' table: Dutch ij, the Afrikaans ŉ, the Serbo-Croatian digraphs, the typographic ligatures.
const LIGATURES: Readonly<Record<string, string>> = {
  "Ĳ": "IJ", "ĳ": "ij", "ŉ": "ʼn", "Ǳ": "DZ", "ǲ": "Dz", "ǳ": "dz", "Ǆ": "DŽ", "ǅ": "Dž", "ǆ": "dž", "Ǉ": "LJ",
  "ǈ": "Lj", "ǉ": "lj", "Ǌ": "NJ", "ǋ": "Nj", "ǌ": "nj", "ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl",
  "ﬅ": "ſt", "ﬆ": "st",
};
const LIGATURE = new RegExp(`[${Object.keys(LIGATURES).join("")}]`, "g");
// fix_character_width: the ideographic space, and the halfwidth and fullwidth forms U+FF01-FFEF, as NFKC has them.
const WIDE = /[\u3000\uff01-\uffef]/g;

/** A caption as ftfy.fix_text leaves it, less the mojibake repair (see above). */
export function ftfyFixed(text: string): string {
  // fix_text takes each line with its "\n" by itself, and decodes no HTML from the first line that holds a "<" on.
  let html = true;
  return (text.match(/[^\n]*\n|[^\n]+$/g) ?? []).map((line) => {
    html &&= !line.includes("<");
    return fixLine(line, html);
  }).join("");
}

function fixLine(line: string, html: boolean): string {
  for (let text = line; ;) {
    const fixed = fixOnce(text, html);
    if (fixed === text) return text;
    text = fixed;
  }
}

// One pass of fix_and_explain, in its order.
function fixOnce(text: string, html: boolean): string {
  const unescaped = html ? text.replace(ENTITY, unescapeEntity) : text;
  return unescaped
    .replace(C1, (c) => CP1252.decode(new Uint8Array([c.charCodeAt(0)])))
    .replace(LIGATURE, (c) => LIGATURES[c]!)
    .replace(WIDE, (c) => (c === "\u3000" ? " " : c.normalize("NFKC")))
    .replace(DOUBLE_QUOTE, '"')
    .replace(SINGLE_QUOTE, "'")
    .toWellFormed()
    .replace(TERMINAL_ESCAPE, "")
    .replace(CONTROL, "")
    .normalize("NFC");
}

function unescapeEntity(entity: string): string {
  const named = NAMED.get(entity.slice(1, -1));
  if (named !== undefined) return named;
  const number = /^&#(?:([0-9]+)|[xX]([0-9a-fA-F]+));$/.exec(entity);
  if (number === null) return entity;
  return charRef(number[1] !== undefined ? Number(number[1]) : parseInt(number[2]!, 16));
}

// html.unescape's numeric reference: NUL and C1 replaced as browsers do, a surrogate or past Unicode U+FFFD, a
// control or noncharacter nothing.
function charRef(code: number): string {
  if (code === 0) return "\ufffd";
  if (code === 0x0d) return "\r";
  if (code >= 0x80 && code <= 0x9f) return CP1252.decode(new Uint8Array([code]));
  if ((code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return "\ufffd";
  const control = code < 0x09 || code === 0x0b || (code >= 0x0e && code <= 0x1f) || code === 0x7f;
  const nonCharacter = (code >= 0xfdd0 && code <= 0xfdef) || (code & 0xfffe) === 0xfffe;
  return control || nonCharacter ? "" : String.fromCodePoint(code);
}
