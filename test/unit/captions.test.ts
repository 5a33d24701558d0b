import { describe, expect, test } from "bun:test";
import { captionCandidates, hasTrigger, trainedLine, withTrigger } from "../../src/dataset/captions.ts";

describe("the trigger in a caption, as the trainer reads it", () => {
  test("the trigger counts as a whole word, in any case, next to punctuation", () => {
    for (const caption of ["ohwx, a man", "a photo of OHWX.", "(ohwx) smiling", "portrait of ohwx person", "ohwx"]) {
      expect({ caption, has: hasTrigger(caption, "ohwx") }).toEqual({ caption, has: true });
    }
  });

  test("contrast: inside a longer word, or only on a line the trainer does not read, it does not count", () => {
    for (const caption of ["ohwxy, a man", "xohwx", "ohwx_man smiling", "ohwx-man", "a man\nohwx"]) {
      expect({ caption, has: hasTrigger(caption, "ohwx") }).toEqual({ caption, has: false });
    }
  });

  test("the trigger is matched as CLIP reads it: lowercased, never case-folded", () => {
    // "ſ" (U+017F) is lowercase already: Python's str.lower, which CLIPTokenizer applies, leaves it, so CLIP reads
    // "ſkſ" as other tokens than "sks" and that caption lacks the trigger.
    expect(hasTrigger("ſkſ woman", "sks")).toBe(false);
    expect(hasTrigger("ſkſ woman", "SKS")).toBe(false);
    // Contrast: a match that folds case, as the worker's did (the "i" flag with "u"), takes it for the trigger.
    expect(/(?<![\p{L}\p{N}_-])sks(?![\p{L}\p{N}_-])/iu.test("ſkſ woman")).toBe(true);
    // What str.lower does map is matched: the Kelvin sign lowercases to "k", and an upper-case trigger to its own.
    expect(hasTrigger("s\u212As woman", "sks")).toBe(true);
    expect(hasTrigger("a photo of sks", "SKS")).toBe(true);
  });

  test("a trigger with - and _ is matched as written", () => {
    expect(hasTrigger("a sks-dog running", "sks-dog")).toBe(true);
    expect(hasTrigger("a sks_dog running", "sks-dog")).toBe(false);
    expect(hasTrigger("my_trigger, close-up", "my_trigger")).toBe(true);
  });

  test("only the first line is trained on, stripped, whatever its line ending", () => {
    expect(trainedLine("  a man  \r\nsecond")).toBe("a man");
    expect(trainedLine("a man\rsecond")).toBe("a man");
    expect(trainedLine("")).toBe("");
  });

  test("the trigger and class lead the trained line; the other lines and line endings stay", () => {
    expect(withTrigger("a man smiling", "ohwx person")).toBe("ohwx person, a man smiling");
    expect(withTrigger("  a man \r\nnotes\n", "ohwx person")).toBe("ohwx person, a man\r\nnotes\n");
    // An empty line (sd-scripts would train on nothing) becomes the class tokens alone.
    expect(withTrigger("", "ohwx person")).toBe("ohwx person");
    expect(withTrigger("\nsecond", "ohwx person")).toBe("ohwx person\nsecond");
  });

  test("an image's caption files, in sd-scripts' order: its stem, then a face crop's stem less four parts", () => {
    expect(captionCandidates("a.png")).toEqual(["a.txt", "a.txt"]);
    expect(captionCandidates("img_1_2_3_4.jpg")).toEqual(["img_1_2_3_4.txt", "img.txt"]);
    expect(captionCandidates("a_b_c_d.png")).toEqual(["a_b_c_d.txt", "a_b_c_d.txt"]);
  });
});
