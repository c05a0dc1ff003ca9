"""The recipe's data steps: corpus splits, tokenizer, held-out files. No numpy, no torch.

What it teaches: everything a model is trained on, and everything `plab eval`
measures it with, follows from a few settings (seed, split sizes, how many
stories the tokenizer learns from) and nothing else. Kept apart from train.py
so that tests/recipe can rebuild tokenizer.bpe and eval/ from recipe.json on a
machine without torch and compare them with the shipped files byte for byte.

What it leaves out: the training stream (train.py builds it, it needs numpy).
"""

import os

import bpe
import corpus

EVAL_ROWS = 300  # held-out stories and completion prompts shipped in eval/


def splits(seed, train_stories, heldout_stories):
    """(train_texts, held_texts, held_completions): the two splits come from different seeds."""
    train_texts, _ = corpus.make_split(seed, train_stories)
    held_texts, held_completions = corpus.make_split(seed + 1, heldout_stories)
    return train_texts, held_texts, held_completions


def tokenizer(train_texts, bpe_stories, vocab_size):
    """Byte-level BPE learned on the first bpe_stories stories of the training split only."""
    tok = bpe.Tokenizer(bpe.train(train_texts[:bpe_stories], vocab_size))
    assert tok.vocab_size == vocab_size
    return tok


def write_tokenizer_and_eval(out_dir, tok, held_texts, held_completions):
    """out_dir/tokenizer.bpe and out_dir/eval/{heldout.txt,completions.tsv} for `plab eval`."""
    os.makedirs(os.path.join(out_dir, "eval"), exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.bpe"))
    with open(os.path.join(out_dir, "eval", "heldout.txt"), "w") as f:
        for t in held_texts[:EVAL_ROWS]:
            f.write(t + "\n")
    with open(os.path.join(out_dir, "eval", "completions.tsv"), "w") as f:
        f.write("# family\tprompt\tanswer (held-out split; the answer is a name the prompt mentioned)\n")
        for family, prompt, answer in held_completions[:EVAL_ROWS]:
            f.write(f"{family}\t{prompt}\t{answer}\n")
