#!/usr/bin/python3
"""Independent reference for Hugging Face tokenizer.json encoding (issue 16).

Written from the format's definition (the `tokenizers` library's documented
pipeline: added tokens -> normalizer -> pre-tokenizer -> BPE model), not from
plab's C++, with the standard library only (Debian's /usr/bin/python3):

  * regex splits run the "Regex" text *from the file* through Python's `re`,
    after spelling out the classes `re` lacks: \\p{L} and \\p{N} from
    unicodedata categories, \\s as Unicode's White_Space (what Oniguruma, the
    engine `tokenizers` uses, means by it);
  * BPE is the plain definition: repeatedly merge the adjacent pair of lowest
    rank (leftmost on ties), rescanning the whole piece each time;
  * NFC is unicodedata.normalize.

Text is bytes: it is decoded with 'surrogateescape', so an ill-formed byte is
one character of no category (U+DC80..U+DCFF) and encodes back to itself.

    /usr/bin/python3 tests/reference/hf_tokenizer_reference.py TOKENIZER_DIR CORPUS.jsonl

CORPUS.jsonl: one {"name": ..., "text": ...} or {"name": ..., "hex": ...} per
line. Prints JSON: {"bos": id|null, "add_bos_token": bool,
"cases": [{"name": ..., "ids": [...], "pieces": [hex, ...]}]} (ids without
BOS; pieces as the hex of their bytes).
"""
import json
import os
import re
import sys
import unicodedata

METASPACE = "\u2581"
# PropList.txt White_Space.
WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# The regex `tokenizers` uses when ByteLevel has use_regex: true (byte_level.rs).
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def class_of(prefix):
    """A character-class body (no brackets) of every code point whose general
    category starts with `prefix` ("L" letters, "N" numbers)."""
    parts, start = [], None
    for cp in range(0x110001):
        inside = cp < 0x110000 and unicodedata.category(chr(cp)).startswith(prefix)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            parts.append("\\U%08X-\\U%08X" % (start, cp - 1))
            start = None
    return "".join(parts)


L_CLASS, N_CLASS = class_of("L"), class_of("N")


def translate(regex):
    """The Oniguruma-style pattern of a tokenizer.json as a Python `re` pattern."""
    out, i, in_class = [], 0, False
    subst = {"\\p{L}": L_CLASS, "\\p{N}": N_CLASS, "\\s": WHITE_SPACE}
    while i < len(regex):
        for key, body in subst.items():
            if regex.startswith(key, i):
                out.append(body if in_class else "[" + body + "]")
                i += len(key)
                break
        else:
            if regex.startswith("\\S", i):
                assert not in_class, "\\S inside a class is not used by the known patterns"
                out.append("[^" + WHITE_SPACE + "]")
                i += 2
            elif regex[i] == "\\":
                out.append(regex[i:i + 2])
                i += 2
            else:
                if regex[i] == "[" and not in_class:
                    in_class = True
                elif regex[i] == "]" and in_class:
                    in_class = False
                out.append(regex[i])
                i += 1
    return re.compile("".join(out))


def isolated_split(pattern, text):
    """Split behaviour "Isolated": every match is a piece, and so is every gap."""
    pieces, last = [], 0
    for m in pattern.finditer(text):
        if m.start() > last:
            pieces.append(text[last:m.start()])
        if m.end() > m.start():
            pieces.append(m.group())
        last = m.end()
    if last < len(text):
        pieces.append(text[last:])
    return pieces


def bytes_to_unicode():
    """GPT-2's table (encoder.py): printable bytes stand for themselves, the
    others are shifted to 256, 257, ... in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class Reference:
    def __init__(self, directory):
        with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        model = tj["model"]
        assert model.get("type", "BPE") == "BPE"
        self.vocab = model["vocab"]
        self.ranks = {}
        for rank, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks[(a, b)] = rank
        self.byte_fallback = bool(model.get("byte_fallback"))
        self.ignore_merges = bool(model.get("ignore_merges"))
        self.fuse_unk = bool(model.get("fuse_unk"))
        self.unk = model.get("unk_token")
        self.added = {a["content"]: a["id"] for a in tj.get("added_tokens") or []}
        alts = []
        for a in sorted(tj.get("added_tokens") or [], key=lambda a: -len(a["content"])):
            ws = "[" + WHITE_SPACE + "]*"
            alts.append((ws if a.get("lstrip") else "") + "(" + re.escape(a["content"]) + ")" +
                        (ws if a.get("rstrip") else ""))
        self.added_re = re.compile("|".join(alts)) if alts else None
        self.normalizers = self.flatten(tj.get("normalizer"), "normalizers")
        self.pre_tokenizers = self.flatten(tj.get("pre_tokenizer"), "pretokenizers")
        self.byte_level = any(p["type"] == "ByteLevel" for p in self.pre_tokenizers)
        self.byte_char = bytes_to_unicode()
        self.bos, self.add_bos_token = None, True
        config = os.path.join(directory, "tokenizer_config.json")
        if os.path.exists(config):
            with open(config, encoding="utf-8") as f:
                c = json.load(f)
            bos = c.get("bos_token")
            if isinstance(bos, dict):
                bos = bos["content"]
            if bos is not None:
                self.bos = self.vocab.get(bos, self.added.get(bos))
            self.add_bos_token = c.get("add_bos_token", True)

    @staticmethod
    def flatten(node, key):
        if node is None:
            return []
        if node["type"] == "Sequence":
            return [x for child in node[key] for x in Reference.flatten(child, key)]
        return [node]

    # -- the pipeline --------------------------------------------------------
    def encode(self, text):
        """(ids, pieces): the pieces are what BPE merges within, in order; an
        added token is a piece of its own."""
        parts, last = [], 0  # (piece, added token id or None)
        if self.added_re is not None:
            for m in self.added_re.finditer(text):
                parts += [(p, None) for p in self.segment(text[last:m.start()], last == 0)]
                content = next(g for g in m.groups() if g is not None)
                parts.append((content, self.added[content]))
                last = m.end()
        parts += [(p, None) for p in self.segment(text[last:], last == 0)]
        ids = []
        for piece, added_id in parts:
            ids += [added_id] if added_id is not None else self.model(piece)
        return ids, [p for p, _ in parts]

    def segment(self, text, at_start):
        if not text:
            return []
        for n in self.normalizers:
            if n["type"] == "Prepend":
                text = n["prepend"] + text
            elif n["type"] == "Replace":
                text = text.replace(n["pattern"]["String"], n["content"])
            elif n["type"] == "NFC":
                text = unicodedata.normalize("NFC", text)
            else:
                raise ValueError(n["type"])
        pieces = [(text, at_start)]
        for p in self.pre_tokenizers:
            nxt = []
            for piece, first in pieces:
                cut = self.pre_tokenize(p, piece, first)
                nxt += [(c, first and k == 0) for k, c in enumerate(cut) if c]
            pieces = nxt
        return [piece for piece, _ in pieces]

    def pre_tokenize(self, p, piece, first):
        t = p["type"]
        if t == "Split":
            assert p["behavior"] == "Isolated" and not p.get("invert")
            return isolated_split(translate(p["pattern"]["Regex"]), piece)
        if t == "ByteLevel":
            if p.get("add_prefix_space") and not piece.startswith(" "):
                piece = " " + piece
            if p.get("use_regex", True):
                return isolated_split(translate(GPT2_REGEX), piece)
            return [piece]
        if t == "Digits":
            return isolated_split(re.compile("[" + N_CLASS + "]" +
                                             ("" if p.get("individual_digits") else "+")), piece)
        if t == "Metaspace":
            s = piece.replace(" ", METASPACE)
            scheme = p.get("prepend_scheme", "always" if p.get("add_prefix_space", True) else "never")
            if (scheme == "always" or (scheme == "first" and first)) and not s.startswith(METASPACE):
                s = METASPACE + s
            if not p.get("split", True):
                return [s]
            return [x for x in re.split("(?=" + METASPACE + ")", s) if x]
        raise ValueError(t)

    def model(self, piece):
        if self.byte_level:
            symbols = [self.byte_char[b] for b in piece.encode("utf-8", "surrogateescape")]
            whole = "".join(symbols)
        else:
            whole = piece
            symbols = []
            for ch in piece:
                if ch in self.vocab:
                    symbols.append(ch)
                    continue
                raw = ch.encode("utf-8", "surrogateescape")
                names = ["<0x%02X>" % b for b in raw]
                if self.byte_fallback and all(n in self.vocab for n in names):
                    symbols += names
                elif self.unk is not None:
                    if not (self.fuse_unk and symbols and symbols[-1] == self.unk):
                        symbols.append(self.unk)
        if self.ignore_merges and whole in self.vocab:  # Llama 3: a whole-word token wins
            return [self.vocab[whole]]
        while len(symbols) > 1:
            best = None
            for i in range(len(symbols) - 1):
                r = self.ranks.get((symbols[i], symbols[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
        return [self.vocab[s] for s in symbols]


def main():
    ref = Reference(sys.argv[1])
    cases = []
    with open(sys.argv[2], encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            raw = bytes.fromhex(c["hex"]) if "hex" in c else c["text"].encode("utf-8")
            ids, pieces = ref.encode(raw.decode("utf-8", "surrogateescape"))
            cases.append({"name": c["name"], "ids": ids,
                          "pieces": [p.encode("utf-8", "surrogateescape").hex() for p in pieces]})
    json.dump({"bos": ref.bos, "add_bos_token": ref.add_bos_token, "cases": cases}, sys.stdout)


if __name__ == "__main__":
    main()
