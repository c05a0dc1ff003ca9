"""Reference solution of the sampler assignment (instructors only: remove before handing out)."""

import numpy as np


def sampling_probs(logits, temperature, top_k, top_p):
    """The distribution a token is drawn from, as the engine's sampler (src/runtime/sampler.h).

    logits: (V,) float32. temperature 0 = greedy; top_k 0 = no limit; top_p 1 = no limit.
    Returns (V,) probabilities summing to 1, zero outside the kept tokens.
    """
    v = logits.shape[0]
    if temperature == 0:
        out = np.zeros(v)
        out[int(np.argmax(logits))] = 1.0  # np.argmax: the lowest id on ties
        return out
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")  # most likely first, ties: lower id first
    keep = min(top_k, v) if top_k > 0 else v
    kept_mass = p[order[:keep]].sum()  # top-p is a share of the top-k set's mass
    running = np.cumsum(p[order[:keep]])
    keep = int(np.searchsorted(running, top_p * kept_mass)) + 1  # first prefix reaching p
    keep = min(keep, len(running))
    out = np.zeros(v)
    out[order[:keep]] = p[order[:keep]] / p[order[:keep]].sum()
    return out


def draw(probs, u):
    """The token where u (in [0, 1)) falls in the running sum of probs, most likely first."""
    order = np.argsort(-probs, kind="stable")
    order = order[probs[order] > 0]
    running = np.cumsum(probs[order])
    i = int(np.searchsorted(running, u * running[-1], side="right"))
    return int(order[min(i, len(order) - 1)])


def sample(logits, temperature, top_k, top_p, seed, n):
    """n token ids drawn from sampling_probs(...) with one generator seeded by `seed`.

    The same seed gives the same draws; the draws follow the distribution.
    """
    rng = np.random.default_rng(seed)  # one generator for all n draws
    probs = sampling_probs(logits, temperature, top_k, top_p)
    return np.array([draw(probs, u) for u in rng.random(n)], dtype=np.int64)
