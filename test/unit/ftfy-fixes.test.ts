import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { planCaptions } from "../../src/dataset/caption-plan.ts";
import { hasTrigger } from "../../src/dataset/captions.ts";
import { clipTokenCounter, tokensAtMost } from "../../src/dataset/clip-tokens.ts";
import { tokenWindowFor } from "../../src/dataset/token-window.ts";
import { asClipReads, type ClipReading } from "../../src/tokenizers/clip-bpe.ts";
import { ftfyFixed } from "../../src/tokenizers/ftfy-fixes.ts";
import { REPO } from "../support/host-tree.ts";

interface Recorded {
  name: string;
  caption: string;
  fixed: string;
  tokens: number;
  tokens_without_fix_encoding: number;
  tokens_nfc_only: number;
}
// transformers 4.54.1's CLIPTokenizer with ftfy 6.3.1 on hostile captions (test/fixtures/clip/SOURCES.md).
const RECORDED: Recorded[] = JSON.parse(
  readFileSync(join(REPO, "test/fixtures/clip/hostile-captions.json"), "utf8"),
).captions;
const MERGES = new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(REPO, "test/fixtures/clip/merges.txt.gz"))));
const counter = clipTokenCounter(MERGES);
const count = (caption: string) => counter(asClipReads(caption));
// The worker's reading before issue 48: NFC alone, whitespace runs one space, lowercased.
const nfcOnly = (caption: string) =>
  counter(caption.normalize("NFC").split(/\s+/).filter(Boolean).join(" ").toLowerCase() as ClipReading);
// The captions ftfy repairs as mojibake, which the worker counts as written (ftfy-fixes.ts says why).
const MOJIBAKE = new Set(["mojibake", "mojibake windows-1252", "mixed mojibake"]);
const spaced = (text: string) => text.split(/\s+/).filter(Boolean).join(" ");

describe("a caption counted as CLIPTokenizer reads it after ftfy", () => {
  test("every recorded caption but mojibake counts the tokens CLIP read, and reads as ftfy fixed it", () => {
    const others = RECORDED.filter(({ name }) => !MOJIBAKE.has(name));
    expect(others.map(({ name, caption }) => ({ name, tokens: count(caption), fixed: spaced(ftfyFixed(caption)) })))
      .toEqual(others.map(({ name, tokens, fixed }) => ({ name, tokens, fixed: spaced(fixed) })));
  });

  test("mojibake is counted as written: never below what CLIP reads once ftfy repairs it", () => {
    const mojibake = RECORDED.filter(({ name }) => MOJIBAKE.has(name));
    expect(mojibake.map(({ name }) => name).sort()).toEqual([...MOJIBAKE].sort());
    for (const { name, caption, tokens, tokens_without_fix_encoding } of mojibake) {
      expect({ name, tokens: count(caption) }).toEqual({ name, tokens: tokens_without_fix_encoding });
      expect(count(caption)).toBeGreaterThan(tokens);
    }
  });

  test("contrast: read in NFC alone, as before, the named captions count otherwise than CLIP", () => {
    const differ = ["digraphs", "ligatures", "digraphs at the 75-token edge", "curly quotes", "fullwidth",
      "html entities", "html entity twice escaped", "c1 controls", "control characters", "terminal escapes"];
    for (const name of differ) {
      const { caption, tokens } = RECORDED.find((r) => r.name === name)!;
      expect({ name, differs: nfcOnly(caption) !== tokens }).toEqual({ name, differs: true });
    }
  });

  test("the caption NFC counted at 75 is 111 to CLIP, and trains on 150 tokens, not 75", () => {
    const { caption, tokens, tokens_nfc_only } = RECORDED.find((r) => r.name === "digraphs at the 75-token edge")!;
    // CLIPTokenizer itself, given NFC in place of ftfy, counted 75 too.
    expect([nfcOnly(caption), tokens_nfc_only, tokens, count(caption)]).toEqual([75, 75, 111, 111]);
    expect([tokenWindowFor(nfcOnly(caption)), tokenWindowFor(count(caption))]).toEqual([75, 150]);
  });

  test("the bound without a tokenizer is never below CLIP on them; contrast: over the bytes as written it was", () => {
    for (const { name, caption, tokens } of RECORDED) {
      expect({ name, atLeast: tokensAtMost(asClipReads(caption)) >= tokens }).toEqual({ name, atLeast: true });
    }
    // The bound as it was, UTF-8 bytes of the caption as written: "ǆ" is two bytes and three tokens as "dž".
    const { caption, tokens } = RECORDED.find((r) => r.name === "digraphs at the 75-token edge")!;
    expect(new TextEncoder().encode(caption.toLowerCase().replace(/\s+/g, "")).length).toBeLessThan(tokens);
  });

  test("HTML is decoded only in a line without a \"<\", as ftfy decides, and references must end in \";\"", () => {
    expect(ftfyFixed("caf&eacute; &amp;amp; &#233;")).toBe("café & é");
    expect(ftfyFixed("caf&eacute; <b>")).toBe("caf&eacute; <b>");
    expect(ftfyFixed("this&not that &amp &#65abc;")).toBe("this&not that &amp &#65abc;");
    expect(ftfyFixed("&#0; &#128; &#xD800; &#1;x")).toBe("\ufffd € \ufffd x");
    // Names of Object's own members are no entities.
    expect(ftfyFixed("&constructor; &toString; &__proto__;")).toBe("&constructor; &toString; &__proto__;");
    // From a line with a "<" on, as fix_text carries its choice over to the lines after.
    expect(ftfyFixed("&amp;\n<b>\n&amp;")).toBe("&\n<b>\n&amp;");
  });
});

describe("the trigger matched as CLIP reads it, after ftfy", () => {
  test("a fullwidth or HTML-escaped trigger is the trigger; contrast: in NFC alone it is not", () => {
    expect(hasTrigger("ＯＨＷＸ, a person", "ohwx")).toBe(true);
    expect(hasTrigger("a &lt;ohwx&gt; person", "ohwx")).toBe(true);
    expect("ＯＨＷＸ".normalize("NFC").toLowerCase()).not.toBe("ohwx");
  });

  test("the trigger's token is counted on the line's own reading: a prefix without the line's \"<\" is not re-read", () => {
    const lead = { trigger: "ohwx", subjectClass: "person", count: counter };
    const line = "&amp; &amp; &amp; ohwx <3";
    const [planned] = planCaptions([{ name: "a.txt", shown: "a.txt", text: line }], lead).captions;
    // CLIP reads "&amp;" three tokens here (no HTML is decoded in the line); decoded, it would be one.
    expect(planned!.triggerToken).toBe(counter("&amp; &amp; &amp; ohwx" as ClipReading));
    expect(planned!.triggerToken).toBeGreaterThan(count("&amp; &amp; &amp; ohwx"));
  });
});
