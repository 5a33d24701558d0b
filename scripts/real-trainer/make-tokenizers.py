#!/usr/bin/env python3
"""Write the two CLIP tokenizers sd-scripts' SDXL training loads, in its --tokenizer_cache_dir layout, without a download.

    make-tokenizers.py OUT_DIR

writes OUT_DIR/openai_clip-vit-large-patch14 and OUT_DIR/laion_CLIP-ViT-bigG-14-laion2B-39B-b160k (sd-scripts looks
for <cache>/<model id with "/" as "_">, library/strategy_base.py _load_tokenizer). Each is a small byte-level BPE
vocabulary learnt here from a few fixed sentences: CLIP's 256 byte symbols (ids 0-255, "!" is 0), the same with "</w>"
(256-511), one id per merge, and the real special tokens <|startoftext|> 49406 and <|endoftext|> 49407. Every id is
below 49408, the text encoders' embedding size; sd-scripts sets tokenizer2.pad_token_id = 0. Any text tokenizes (a
word falls back to its bytes), so captions and prompts need no particular words. Writing needs only the standard
library; where transformers is importable (run it with sd-scripts' venv python) each is then loaded and checked.
"""
import json
import re
import sys
from pathlib import Path

BOS, EOS = "<|startoftext|>", "<|endoftext|>"
BOS_ID, EOS_ID = 49406, 49407
MODEL_MAX_LENGTH = 77
NUM_MERGES = 300  # at most; the corpus below gives fewer
# What the merges are learnt from: words of the captions and sample prompts a LoRA run sees.
CORPUS = """
a photo of a person, portrait photo, head and shoulders, looking at the camera, soft light.
full body photo, standing, outdoors, natural light. close-up photo of the face, neutral expression, sharp focus.
candid photo sitting at a cafe table, depth of field. blurry, low quality, deformed, disfigured, watermark, text.
the man the woman the young woman the old man the dog the cat the style of the painting in the room
"""
TOKENIZERS = {
    # (directory, pad token): openai's CLIP pads with <|endoftext|>, laion's bigG with "!" (id 0).
    "openai_clip-vit-large-patch14": EOS,
    "laion_CLIP-ViT-bigG-14-laion2B-39B-b160k": "!",
}


def bytes_to_unicode() -> list[str]:
    """CLIP's (GPT-2's) printable stand-in for each byte, in CLIP's id order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def learn_merges(words: list[str], count: int) -> list[tuple[str, str]]:
    """Plain BPE: repeatedly merge the most frequent adjacent pair (ties broken by the pair, for determinism)."""
    seqs = [list(w[:-1]) + [w[-1] + "</w>"] for w in words]
    merges = []
    while len(merges) < count:
        pairs: dict[tuple[str, str], int] = {}
        for s in seqs:
            for pair in zip(s, s[1:]):
                pairs[pair] = pairs.get(pair, 0) + 1
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        for s in seqs:
            i = 0
            while i < len(s) - 1:
                if (s[i], s[i + 1]) == best:
                    s[i : i + 2] = [s[i] + s[i + 1]]
                i += 1
    return merges


def build_vocab() -> tuple[dict[str, int], list[tuple[str, str]]]:
    symbols = bytes_to_unicode()
    vocab = {s: i for i, s in enumerate(symbols)}
    vocab.update({s + "</w>": 256 + i for i, s in enumerate(symbols)})
    words = re.findall(r"[a-z]+", CORPUS.lower())  # ASCII letters map to themselves among the byte symbols
    merges = learn_merges(words, NUM_MERGES)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab[BOS] = BOS_ID
    vocab[EOS] = EOS_ID
    assert len(vocab) < BOS_ID and max(vocab.values()) < 49408
    return vocab, merges


def write_tokenizer(target: Path, vocab: dict[str, int], merges: list[tuple[str, str]], pad: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    (target / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    # CLIPTokenizer skips the first line of merges.txt (the version header).
    lines = ["#version: 0.2 - written by make-tokenizers.py"] + [f"{a} {b}" for a, b in merges]
    (target / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    special = {"bos_token": BOS, "eos_token": EOS, "unk_token": EOS, "pad_token": pad}
    (target / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    config = {
        "tokenizer_class": "CLIPTokenizer",
        "model_max_length": MODEL_MAX_LENGTH,
        "do_lower_case": True,
        "errors": "replace",
        "add_prefix_space": False,
        **special,
    }
    (target / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    out = Path(sys.argv[1])
    vocab, merges = build_vocab()
    for name, pad in TOKENIZERS.items():
        write_tokenizer(out / name, vocab, merges, pad)
        print(f"{out / name}: {len(vocab)} tokens, {len(merges)} merges, pad {pad!r}")
    check(out)


def check(out: Path) -> None:
    """Where transformers is importable (sd-scripts' venv), load each as sd-scripts does and tokenize a caption."""
    try:
        from transformers import CLIPTokenizer
    except ImportError:
        print("transformers not importable here: not checked")
        return
    for name in TOKENIZERS:
        tokenizer = CLIPTokenizer.from_pretrained(str(out / name))
        ids = tokenizer("tok person, photo", padding="max_length", max_length=MODEL_MAX_LENGTH, truncation=True).input_ids
        assert len(ids) == MODEL_MAX_LENGTH and ids[0] == BOS_ID and EOS_ID in ids and max(ids) < 49408, ids
        print(f"{name}: loads, 'tok person, photo' -> {ids[:8]}... ({len(ids)} ids)")


if __name__ == "__main__":
    main()
