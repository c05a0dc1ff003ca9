#!/usr/bin/python3
"""Writes the small test tokenizers of tests/golden/hf_tokenizers/ in Hugging
Face's tokenizer.json format (same keys and structure as the files shipped with
GPT-2, Llama 3, Qwen 2, SmolLM, Llama 2 and TinyLlama), and the test corpus.

    /usr/bin/python3 tests/reference/make_hf_test_tokenizers.py   (from the repository root)

Each vocabulary is trained here: a few hundred BPE merges counted over
TRAINING (multilingual text), the most frequent adjacent pair first (ties by
the pair's text, so the files are deterministic). The trainer only has to
produce valid, interesting files; which ids they give is decided by the
reference (hf_tokenizer_reference.py) and by plab, and compared in
tests/model/test_tokenizer_hf.cpp.
"""
import collections
import json
import os
import re

# GPT-2's byte -> character table, from the reference beside this script.
from hf_tokenizer_reference import bytes_to_unicode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "golden", "hf_tokenizers")
METASPACE = "\u2581"

TRAINING = """Once upon a time, there was a little girl named Lily. She liked to play in the
park with her friends. They're happy, and we'll see what they've done. It's 2024 and
the year 1999 was long ago: 3.14159, 12,345 and 1000000 cats.
Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.
Καλημέρα κόσμε· η γλώσσα μου έδωσαν ελληνική.
Blåbærgrød med fløde på øen Ærø er godt. Søen og åen.
東京は日本の首都です。我爱自然语言处理。今日はいい天気ですね。
def main():\n    return 42  # the answer\n\n\tindented    spaces
I love 🦀 and 🎉 and ❤️ the the the the and and and of of to to in in is is
"""

GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")




def train(words, n_merges):
    """Plain BPE training over words (lists of symbols): returns the merges."""
    counts = collections.Counter(tuple(w) for w in words)
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in counts.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), c = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if c < 2:
            break
        merges.append((a, b))
        new = collections.Counter()
        for w, c in counts.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new[tuple(out)] += c
        counts = new
    return merges


def rough_words(text):
    # A simple split for training only: a space glued to the word after it.
    return re.findall(r" ?\w+| ?[^\w\s]+|\s+", text)


def added(id_, content, special=True, lstrip=False, rstrip=False, normalized=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def write(name, tokenizer, config):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
        f.write("\n")
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=1)
            f.write("\n")


def bpe_model(vocab, merges, pair_form=False, **extra):
    m = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
         "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False}
    m.update(extra)
    m["vocab"] = vocab
    m["merges"] = [[a, b] if pair_form else a + " " + b for a, b in merges]
    return m


def byte_level(name, split, n_merges, added_tokens, config, normalizer=None, pair_form=False,
               extra_words=(), **model_extra):
    table = bytes_to_unicode()
    words = [[table[b] for b in w.encode()] for w in rough_words(TRAINING)]
    merges = train(words, n_merges)
    vocab = {table[b]: i for i, b in enumerate(sorted(table))}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    for w in extra_words:  # whole words without merges (what ignore_merges is for)
        vocab.setdefault("".join(table[b] for b in w.encode()), len(vocab))
    tokens = []
    for content, special, kw in added_tokens:
        if content not in vocab:
            vocab_id = len(vocab) + len(tokens)
        else:
            vocab_id = vocab[content]
        tokens.append(added(vocab_id, content, special, **kw))
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
          "use_regex": split is None}
    if split is None:
        pre = bl
    elif split == "digits":
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True}, dict(bl, use_regex=True)]}
    else:
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated",
             "invert": False}, bl]}
    write(name, {"version": "1.0", "truncation": None, "padding": None,
                 "added_tokens": tokens, "normalizer": normalizer, "pre_tokenizer": pre,
                 "post_processor": {"type": "ByteLevel", "add_prefix_space": True,
                                    "trim_offsets": False, "use_regex": True},
                 "decoder": {"type": "ByteLevel", "add_prefix_space": True,
                             "trim_offsets": True, "use_regex": True},
                 "model": bpe_model(vocab, merges, pair_form, **model_extra)}, config)


def sentencepiece(name, n_merges, normalizer, pre_tokenizer, decoder, config):
    text = TRAINING
    words = [list(METASPACE + w) for w in text.replace("\n", " ").split(" ") if w]
    counts = collections.Counter(ch for w in words for ch in w)
    # Characters seen once are left out: they take the byte fallback.
    chars = sorted(ch for ch, c in counts.items() if c >= 2)
    words = [[ch if ch in chars else "?" for ch in w] for w in words]
    merges = train(words, n_merges)
    merges = [(a, b) for a, b in merges if "?" not in a + b]
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    tokens = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]
    write(name, {"version": "1.0", "truncation": None, "padding": None, "added_tokens": tokens,
                 "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
                 "post_processor": {"type": "TemplateProcessing",
                                    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                               {"Sequence": {"id": "A", "type_id": 0}}],
                                    "pair": [], "special_tokens": {}},
                 "decoder": decoder,
                 "model": bpe_model(vocab, merges, unk_token="<unk>", fuse_unk=True,
                                    byte_fallback=True)}, config)


def corpus():
    cases = [
        ("english", "Once upon a time, there was a little girl named Lily."),
        ("contractions", "I'm sure they're here; we'll see. It's HE'S, THEY'RE, you'VE, it'\u017fx IT'\u017fS"),
        ("russian", "Привет, мир! Съешь же ещё этих мягких французских булок."),
        ("greek", "Καλημέρα κόσμε· τί κάνεις; Ελληνικά!"),
        ("danish", "Blåbærgrød med fløde på øen Ærø. ÆØÅ æøå"),
        ("cjk", "東京は日本の首都です。我爱自然语言处理。한국어 텍스트"),
        ("emoji", "I \u2764\ufe0f \U0001F980 and \U0001F469\u200d\U0001F469\u200d\U0001F467 \U0001F389\U0001F389!"),
        ("whitespace_runs", "a  b   c\t\td\n\n\ne \r\n f    g\u3000h\u00a0i    "),
        ("leading_spaces", "    indented\n\tline"),
        ("only_spaces", "     "),
        ("newlines_after_punct", "Hello!\n\nWorld?\r\n\r\n...\n"),
        ("digits", "1234567 3.14159 12,345 \u0663\u0664\u0665 \u00bd \u216b 2024-12-01"),
        ("code", "def main():\n    return 42  # the answer\nx=[1,2,3]; y = x[0]**2"),
        ("symbols", "hello_world-foo.bar/baz?x=1&y=2 @user #tag $5 100% <tag/>"),
        ("metaspace_char", "a\u2581b"),
        ("single_char", "x"),
        ("empty", ""),
        ("training_text", TRAINING),
    ]
    rows = [{"name": n, "text": t, "round_trip": True} for n, t in cases]
    for r in rows:  # a literal '▁' reads back as a space in SentencePiece files
        r["round_trip_sentencepiece"] = METASPACE not in r["text"]
    invalid = [
        ("invalid_lone_bytes", b"Hello \xff\xfe world \x80"),
        ("invalid_truncated", b"caf\xc3 na\xe2\x82 end \xf0\x9f\x98"),
        # Each glued to letters: Llama 3's [^\r\n\p{L}\p{N}]?\p{L}+ takes one
        # character before a word, so three ill-formed bytes split otherwise than
        # one (wrongly accepted) character would.
        ("invalid_overlong_surrogate", b"\xc0\xafx\xed\xa0\x80abc \xf4\x90\x80\x80ok"),
        ("invalid_mixed", "Привет ".encode() + b"\xd0" + " мир 🦀".encode() + b"\x9f!"),
    ]
    rows += [{"name": n, "hex": b.hex(), "round_trip": True, "round_trip_sentencepiece": True}
             for n, b in invalid]
    special = [
        ("special_llama3", "<|begin_of_text|>Hello<|end_of_text|> x <|reserved_special_token_0|>"),
        ("special_lstrip", "a  <mask>  b<mask>c"),
        ("special_sentencepiece", "<s> Hello </s><s>x"),
        ("special_qwen", "<|im_start|>user\nHi<|im_end|>\n<|endoftext|>"),
    ]
    rows += [{"name": n, "text": t, "round_trip": False, "round_trip_sentencepiece": False}
             for n, t in special]
    with open(os.path.join(OUT, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    byte_level("gpt2", None, 300, [("<|endoftext|>", True, {"normalized": True})],
               {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                "add_bos_token": False})
    byte_level("llama3", LLAMA3_REGEX, 300,
               [("<|begin_of_text|>", True, {}), ("<|end_of_text|>", True, {}),
                ("<|reserved_special_token_0|>", True, {}),
                ("<mask>", False, {"lstrip": True, "rstrip": True})],
               {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"},
               pair_form=True, ignore_merges=True,
               extra_words=[" little", " French", " Lily", "Hello", " world", "ello"])
    byte_level("qwen2", QWEN2_REGEX, 300,
               [("<|endoftext|>", True, {}), ("<|im_start|>", True, {}),
                ("<|im_end|>", True, {})],
               {"bos_token": None, "eos_token": "<|im_end|>"},
               normalizer={"type": "NFC"})
    # Digits (one digit per piece) before ByteLevel with GPT-2's regex: the
    # StarCoder-style pre-tokenizer of SmolLM's tokenizer (check a downloaded
    # model's file: plab reads whichever of these splits it names).
    byte_level("smollm", "digits", 300,
               [("<|endoftext|>", True, {}), ("<|im_start|>", True, {}),
                ("<|im_end|>", True, {})],
               {"bos_token": {"content": "<|im_start|>", "lstrip": False},
                "eos_token": "<|im_end|>", "add_bos_token": False})
    sentencepiece(
        "llama2", 250,
        {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": METASPACE},
            {"type": "Replace", "pattern": {"String": " "}, "content": METASPACE}]},
        None,
        {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": METASPACE}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
         "add_eos_token": False})
    sentencepiece(
        "metaspace", 250, None,
        {"type": "Metaspace", "replacement": METASPACE, "prepend_scheme": "first",
         "split": False},
        {"type": "Metaspace", "replacement": METASPACE, "prepend_scheme": "first",
         "split": False},
        {"bos_token": {"content": "<s>"}, "eos_token": {"content": "</s>"}})
    corpus()
    for name in sorted(os.listdir(OUT)):
        p = os.path.join(OUT, name)
        size = sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p)) \
            if os.path.isdir(p) else os.path.getsize(p)
        print("%-12s %6d bytes" % (name, size))


main()
