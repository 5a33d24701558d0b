#!/usr/bin/env python3
"""Write the two CLIP tokenizers sd-scripts' SDXL training loads, in its --tokenizer_cache_dir layout, without a download.

    make-tokenizers.py OUT_DIR

writes OUT_DIR/openai_clip-vit-large-patch14 and OUT_DIR/laion_CLIP-ViT-bigG-14-laion2B-39B-b160k (sd-scripts looks
for <cache>/<model id with "/" as "_">, library/strategy_base.py _load_tokenizer). Both are CLIP's real tokenizer:
merges.txt is test/fixtures/clip/merges.txt.gz (CLIP's 48894 merges, see its SOURCES.md) and vocab.json is built from
it as CLIP builds it, 49408 tokens: the 256 byte symbols (ids 0-255, "!" is 0), the same with "</w>" (256-511), one
token per merge (512-49405), <|startoftext|> 49406 and <|endoftext|> 49407; sd-scripts sets tokenizer2.pad_token_id
= 0. `lora-worker tokenizers import` checks them as it checks the hub's. Writing needs only the standard library;
where transformers is importable (run it with sd-scripts' venv python) each is then loaded and checked.
"""
import gzip
import json
import sys
from pathlib import Path

BOS, EOS = "<|startoftext|>", "<|endoftext|>"
MODEL_MAX_LENGTH = 77
MERGES = Path(__file__).resolve().parents[2] / "test" / "fixtures" / "clip" / "merges.txt.gz"
TOKENIZERS = {
    # (directory, pad token): openai's CLIP pads with <|endoftext|>, laion's bigG with "!" (id 0).
    "openai_clip-vit-large-patch14": EOS,
    "laion_CLIP-ViT-bigG-14-laion2B-39B-b160k": "!",
}
# A caption and the ids CLIP gives it (src/tokenizers/clip-vocabulary.ts KNOWN_CAPTIONS).
CAPTION, CAPTION_IDS = "a photo of ohwx person", [49406, 320, 1125, 539, 47993, 2533, 49407]


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


def build_vocab(merges_text: str) -> dict[str, int]:
    symbols = bytes_to_unicode()
    merged = ["".join(line.split()) for line in merges_text.strip().split("\n")[1:]]
    tokens = symbols + [s + "</w>" for s in symbols] + merged + [BOS, EOS]
    vocab = {token: i for i, token in enumerate(tokens)}
    assert len(vocab) == 49408, len(vocab)
    return vocab


def write_tokenizer(target: Path, vocab: dict[str, int], merges_text: str, pad: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    (target / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (target / "merges.txt").write_text(merges_text, encoding="utf-8")
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
    merges_text = gzip.decompress(MERGES.read_bytes()).decode("utf-8")
    vocab = build_vocab(merges_text)
    for name, pad in TOKENIZERS.items():
        write_tokenizer(out / name, vocab, merges_text, pad)
        print(f"{out / name}: {len(vocab)} tokens, pad {pad!r}")
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
        assert tokenizer(CAPTION).input_ids == CAPTION_IDS, tokenizer(CAPTION).input_ids
        ids = tokenizer(CAPTION, padding="max_length", max_length=MODEL_MAX_LENGTH, truncation=True).input_ids
        assert len(ids) == MODEL_MAX_LENGTH, ids
        print(f"{name}: loads, {CAPTION!r} -> {CAPTION_IDS}")


if __name__ == "__main__":
    main()
