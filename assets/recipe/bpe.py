"""Byte-level BPE: training, encoding, decoding, and the tokenizer file format.

What it teaches: byte pair encoding (Sennrich et al. 2016; byte-level as in
GPT-2) starts from the 256 byte values, so *any* byte string is encodable and
decodes back exactly, then repeatedly merges the most frequent adjacent pair
into a new token. A merge list is the whole tokenizer.

Pre-tokenization (shared with src/model/tokenizers/tokenizer_bpe.cpp, keep them equal):
the text is cut into pieces and merges never cross a piece boundary.
A byte is a *letter* if it is A-Z, a-z or >= 0x80 (so UTF-8 words stay
together), a *digit* if 0-9. A piece is
  * an optional single space followed by a maximal run of letters, or
  * an optional single space followed by a maximal run of digits, or
  * any other single byte (a space not followed by a letter/digit, '.', '\n', ...).
Within a piece, the pair with the lowest merge rank is merged first (leftmost
on ties), until no adjacent pair has a merge. This is GPT-2's rule.

File format "plab-bpe" version 1 (UTF-8 text, '\n' line ends):
    plab-bpe 1
    vocab_size 512
    bos 256
    eos 257
    merges 254
    116 104
    ...                 (one merge per line: left id, right id)
Ids 0..255 are the bytes, bos/eos follow, and merge k (0-based) creates id
258 + k from the pair on its line. vocab_size must equal 258 + merges.

What it leaves out: regex pre-tokenizers (GPT-2's contractions rule),
Unicode normalisation, added/special tokens beyond BOS and EOS, byte
fallback tables (bytes are the base vocabulary, so none is needed).
"""

from collections import Counter

BOS, EOS, FIRST_MERGE_ID = 256, 257, 258


def _is_letter(b):
    return 65 <= b <= 90 or 97 <= b <= 122 or b >= 0x80


def _is_digit(b):
    return 48 <= b <= 57


def pretokenize(data: bytes):
    """Cuts bytes into pieces as described in the module docstring."""
    pieces, i, n = [], 0, len(data)
    while i < n:
        start = i
        j = i + 1 if (data[i] == 32 and i + 1 < n) else i
        if j < n and (_is_letter(data[j]) or _is_digit(data[j])):
            cls = _is_letter if _is_letter(data[j]) else _is_digit
            k = j
            while k < n and cls(data[k]):
                k += 1
            pieces.append(data[start:k])
            i = k
        else:
            pieces.append(data[start:start + 1])
            i = start + 1
    return pieces


def train(texts, vocab_size):
    """Learns vocab_size - 258 merges from a list of strings."""
    words = Counter()
    for t in texts:
        for p in pretokenize(t.encode("utf-8")):
            words[p] += 1
    seqs = {w: list(w) for w in words}
    merges = []
    for k in range(vocab_size - FIRST_MERGE_ID):
        pairs = Counter()
        for w, seq in seqs.items():
            c = words[w]
            for a, b in zip(seq, seq[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        # Most frequent pair; ties broken by the smaller pair, so training is deterministic.
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        new_id = FIRST_MERGE_ID + k
        merges.append(best)
        for w, seq in seqs.items():
            seqs[w] = _apply(seq, best, new_id)
    return merges


def _apply(seq, pair, new_id):
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and seq[i] == pair[0] and seq[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


class Tokenizer:
    def __init__(self, merges):
        self.merges = list(merges)
        self.ranks = {tuple(p): r for r, p in enumerate(self.merges)}
        self.vocab_size = FIRST_MERGE_ID + len(self.merges)
        self.token_bytes = [bytes([i]) for i in range(256)] + [b"", b""]
        for a, b in self.merges:
            self.token_bytes.append(self.token_bytes[a] + self.token_bytes[b])
        self._cache = {}

    def _encode_piece(self, piece):
        if piece in self._cache:
            return self._cache[piece]
        seq = list(piece)
        while len(seq) > 1:
            best, best_rank = -1, None
            for i in range(len(seq) - 1):
                r = self.ranks.get((seq[i], seq[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best < 0:
                break
            seq[best:best + 2] = [FIRST_MERGE_ID + best_rank]
        self._cache[piece] = seq
        return seq

    def encode(self, text, add_bos=False):
        ids = [BOS] if add_bos else []
        for p in pretokenize(text.encode("utf-8")):
            ids.extend(self._encode_piece(p))
        return ids

    def decode(self, ids):
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", errors="replace")

    def save(self, path):
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write("plab-bpe 1\n")
            f.write(f"vocab_size {self.vocab_size}\nbos {BOS}\neos {EOS}\n")
            f.write(f"merges {len(self.merges)}\n")
            for a, b in self.merges:
                f.write(f"{a} {b}\n")

    @staticmethod
    def load(path):
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        assert lines[0] == "plab-bpe 1", f"{path}: not a plab-bpe 1 file"
        n = int(lines[4].split()[1])
        merges = [tuple(int(x) for x in lines[5 + k].split()) for k in range(n)]
        return Tokenizer(merges)
