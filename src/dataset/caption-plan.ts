import type { TokenWindow } from "../job.ts";
import { captionCandidates, trainedLine, upToTrigger, withTrigger } from "./captions.ts";
import type { TokenCounter } from "./clip-tokens.ts";
import { asClipReads } from "../tokenizers/clip-bpe.ts";
import { tokenWindowFor } from "./token-window.ts";

// What each caption file becomes, and the context the run trains them on. A caption holding the trigger as a whole
// word stays as it is while the trigger lies within the context; one without it, or whose trigger lies past it
// (sd-scripts cuts the caption there, and the trigger with it), gets `<trigger> <class>, ` in front. The context is
// the smallest that holds the longest caption as trained. Leading a caption only lengthens it, so the context
// chosen after leading holds every caption kept before: one pass settles both.

/** A caption file as read: its name in the copy, as arbo's dataset dir names it, and its text. */
export interface CaptionFile {
  name: string;
  shown: string;
  text: string;
}

/**
 * What a caption file becomes: `text` as the trainer reads it, `prefix` what was put in front (null when kept) and
 * `triggerToken` the token a kept or moved caption's trigger ended at, counted as far as TokenCounter counts (null
 * when it had none).
 */
export interface PlannedCaption extends CaptionFile {
  did: "caption_kept" | "trigger_added" | "trigger_moved";
  tokens: number;
  prefix: string | null;
  triggerToken: number | null;
}

/** The captions as the trainer reads them, the context chosen, and the caption that chose it. */
export interface CaptionPlan {
  captions: PlannedCaption[];
  window: TokenWindow;
  longest: { caption: string; tokens: number } | null;
}

/** What the captions are led with, and how their tokens are counted. */
export interface LeadWith {
  trigger: string;
  subjectClass: string;
  count: TokenCounter;
}

export function planCaptions(files: CaptionFile[], lead: LeadWith): CaptionPlan {
  const classTokens = `${lead.trigger} ${lead.subjectClass}`;
  const led = (file: CaptionFile) => {
    const text = withTrigger(file.text, classTokens);
    const line = trainedLine(text);
    return { text, prefix: line.slice(0, line.length - trainedLine(file.text).length) };
  };
  const first: PlannedCaption[] = [];
  for (const file of files) {
    const line = trainedLine(file.text);
    const before = upToTrigger(line, lead.trigger);
    if (before === null) {
      const { text, prefix } = led(file);
      const tokens = lead.count(asClipReads(trainedLine(text)));
      first.push({ ...file, text, did: "trigger_added", prefix, tokens, triggerToken: null });
    } else {
      const [tokens, triggerToken] = [lead.count(asClipReads(line)), lead.count(before)];
      first.push({ ...file, did: "caption_kept", tokens, prefix: null, triggerToken });
    }
  }
  const kept = tokenWindowFor(Math.max(0, ...first.map((c) => c.tokens)));
  const captions: PlannedCaption[] = [];
  for (const planned of first) {
    if (planned.did !== "caption_kept" || (planned.triggerToken ?? 0) <= kept) {
      captions.push(planned);
      continue;
    }
    const { text, prefix } = led(planned);
    const tokens = lead.count(asClipReads(trainedLine(text)));
    captions.push({ ...planned, text, did: "trigger_moved", prefix, tokens });
  }
  const longest = captions.reduce<PlannedCaption | null>((a, c) => (a === null || c.tokens > a.tokens ? c : a), null);
  return {
    captions,
    window: tokenWindowFor(longest?.tokens ?? 0),
    longest: longest === null ? null : { caption: longest.shown, tokens: longest.tokens },
  };
}

/** The caption files sd-scripts reads for `images` among the files `names`, each once, sorted; and the images that
 * have none. */
export function captionsOf(images: string[], names: Set<string>): { captions: string[]; bare: string[] } {
  const captions = new Set<string>();
  const bare: string[] = [];
  for (const image of images) {
    const caption = captionCandidates(image).find((name) => names.has(name));
    if (caption === undefined) bare.push(image);
    else captions.add(caption);
  }
  return { captions: [...captions].sort(), bare };
}
