"""Train the shipped tiny model: corpus -> BPE -> PyTorch training -> model dir.

What it teaches: the whole life of a small language model in one script,
reproducible from one settings file: generate the data, learn a tokenizer, train
a Llama-style decoder with AdamW and a cosine schedule, check it on a held-out
split it never saw, and export it in the engine's format. Every default comes
from recipe.json (settings.py); the export records the settings it used.

What it leaves out: mixed precision, data parallelism, checkpoint resume,
hyper-parameter search. Run it with Debian's /usr/bin/python3 (see run.sh).

  /usr/bin/python3 train.py --out /tmp/m              # recipe.json's model, elsewhere
  /usr/bin/python3 train.py --steps 40 --out /tmp/m   # a smoke test
  PLAB_RECIPE_DRY_RUN=1 /usr/bin/python3 train.py     # print the settings, train nothing
"""

import json
import math
import os
import random
import sys
import time

import settings

if __name__ == "__main__":
    # Settings before numpy and torch: a dry run (tests/recipe) must work where
    # torch is absent, and OpenBLAS reads its thread count only when it is loaded.
    ARGS = settings.parse_args()
    if settings.dry_run_requested():
        settings.print_dry_run(ARGS)
        sys.exit(0)
    settings.pin_threads(ARGS.threads)

import numpy as np  # noqa: E402  (after pin_threads, see above)
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import bpe  # noqa: E402
import data  # noqa: E402
import export  # noqa: E402
from model import TinyLlama  # noqa: E402

# Model shapes are code (settings.py says why). "main" is the shipped model
# (assets/model); "draft" its speculative-decoding draft (assets/draft,
# lesson 18): one layer of the same width, the same tokenizer (learned from
# the same seed and stories), a quarter of the layers' work per token.
SHAPES = {
    "main": dict(dim=128, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=32, hidden_dim=384,
                 vocab_size=512, max_seq_len=512, rope_theta=10000.0, norm_eps=1e-5),
    "draft": dict(dim=128, n_layers=1, n_heads=4, n_kv_heads=2, head_dim=32, hidden_dim=384,
                  vocab_size=512, max_seq_len=512, rope_theta=10000.0, norm_eps=1e-5),
}
CONFIG = SHAPES[ARGS.shape] if __name__ == "__main__" else SHAPES["main"]


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def build_stream(tok, texts):
    """[BOS story EOS BOS story EOS ...] and the offsets of every BOS."""
    ids, starts = [], []
    for t in texts:
        starts.append(len(ids))
        ids.extend(tok.encode(t, add_bos=True))
        ids.append(bpe.EOS)
    return np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64)


@torch.no_grad()
def completion_accuracy(model, tok, completions, limit):
    model.eval()
    ok = 0
    for family, prompt, answer in completions[:limit]:
        ids = tok.encode(prompt, add_bos=True)
        want = tok.encode(answer)
        logits = model(torch.tensor([ids]))[0, -1]
        ok += int(int(logits.argmax()) == want[0])
    model.train()
    return ok / max(1, min(limit, len(completions)))


@torch.no_grad()
def heldout_loss(model, stream, starts, seq_len, n):
    model.eval()
    losses = []
    for s in starts[:n]:
        x = torch.from_numpy(stream[s:s + seq_len + 1][None])
        logits = model(x[:, :-1])
        losses.append(F.cross_entropy(logits[0], x[0, 1:]).item())
    model.train()
    return sum(losses) / len(losses)


def copy_row(rng, length, vocab):
    """[BOS] s s [BOS] s' s' ... with s random merged tokens (ids 258..V-1), 6-24 long.

    The purest form of the corpus's repeated sequences: the second copy of s is
    predictable only by finding the first copy and reading the token after the
    current one's earlier occurrence. Without this signal a 1M-parameter model
    needs far more than our CPU budget before its induction heads form (the
    "phase change" of Olsson et al. 2022); with a quarter of each batch it
    forms within a few hundred steps (see --copy-warmup). `plab eval` measures induction on fresh
    random sequences, and the stories' name completions use the same circuit.
    """
    row = []
    while len(row) < length:
        s = list(rng.randint(bpe.FIRST_MERGE_ID, vocab, size=rng.randint(6, 25)))
        row += [bpe.BOS] + s + s
    return np.array(row[:length], dtype=np.int64)


def save(args, model, tok, held_texts, held_completions, steps_done):
    """Export: model dir + tokenizer + the held-out split for `plab eval`."""
    tied = True
    tensors = export.torch_state_to_hf(model)
    meta = settings.metadata(args, steps_done, torch.__version__, np.__version__)
    export.save_model_dir(args.out, CONFIG, tensors, "tokenizer.bpe", tied, meta)
    data.write_tokenizer_and_eval(args.out, tok, held_texts, held_completions)


def main(args):
    torch.set_num_threads(args.threads)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    t0 = time.time()
    log(f"settings {json.dumps(settings.settings_of(args))}; OPENBLAS_NUM_THREADS="
        f"{os.environ.get('OPENBLAS_NUM_THREADS')}, torch {torch.__version__}, numpy {np.__version__}")

    # 1. Corpus: training and held-out splits come from different seeds.
    train_texts, held_texts, held_completions = data.splits(
        args.seed, args.train_stories, args.heldout_stories)
    log(f"corpus: {len(train_texts)} training stories, {len(held_texts)} held-out stories")

    # 2. Tokenizer: byte-level BPE learned on (part of) the training split only.
    tok = data.tokenizer(train_texts, args.bpe_stories, CONFIG["vocab_size"])
    train_stream, train_starts = build_stream(tok, train_texts)
    held_stream, held_starts = build_stream(tok, held_texts)
    log(f"tokenizer: {tok.vocab_size} tokens; training stream {len(train_stream)} tokens "
        f"({len(train_stream) / sum(len(t) + 2 for t in train_texts):.2f} tokens/byte)")

    # 3. Training: windows of seq_len+1 tokens that start at a story's BOS.
    model = TinyLlama(CONFIG)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params} parameters, config {json.dumps(CONFIG)}")
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    usable = train_starts[train_starts + args.seq_len + 1 <= len(train_stream)]
    rng = np.random.RandomState(args.seed)
    warmup = max(1, args.steps // 20)
    for step in range(args.steps):
        lr = args.lr * (step + 1) / warmup if step < warmup else \
            args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (args.steps - warmup))))
        for g in opt.param_groups:
            g["lr"] = lr
        # Curriculum: the first copy_warmup steps are repeated random tokens only, so the
        # induction circuit forms early; afterwards copy_rows rows per batch keep it alive.
        n_copy = args.batch if step < args.copy_warmup else args.copy_rows
        idx = rng.choice(usable, size=args.batch - n_copy)
        rows = [train_stream[i:i + args.seq_len + 1] for i in idx]
        rows += [copy_row(rng, args.seq_len + 1, tok.vocab_size) for _ in range(n_copy)]
        x = torch.from_numpy(np.stack(rows))
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            log(f"step {step:5d}/{args.steps} lr {lr:.2e} loss {loss.item():.4f}")
        if (step + 1) % 100 == 0 or step == args.steps - 1 or step + 1 == args.stop_at:
            # A snapshot every 100 steps: a long run interrupted still leaves a usable model.
            save(args, model, tok, held_texts, held_completions, step + 1)
        if step + 1 == args.stop_at:
            break
        if (step + 1) % 200 == 0 or step == args.steps - 1:
            acc = completion_accuracy(model, tok, held_completions, 200)
            hl = heldout_loss(model, held_stream, held_starts, args.seq_len, 40)
            log(f"  eval: held-out loss {hl:.4f}, templated completions {acc * 100:.1f}%")
    train_s = time.time() - t0
    log(f"training done in {train_s / 60:.1f} min")
    final_acc = completion_accuracy(model, tok, held_completions, 300)
    log(f"exported to {args.out}: completions {final_acc * 100:.1f}% on 300 held-out prompts; "
        f"total {(time.time() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main(ARGS)
