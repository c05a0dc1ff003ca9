"""Sampler assignment: fill in sampling_probs(), draw() and sample() (lessons/assignments/sampler/README.md).

Grade with:  plab grade sampler starter.py
"""

import numpy as np


def sampling_probs(logits, temperature, top_k, top_p):
    """The distribution the next token is drawn from.

    logits: (V,) float32. temperature: 0 means greedy (probability 1 at the argmax,
    lowest id on ties). top_k: keep the k most likely tokens (0 = no limit).
    top_p: then keep the smallest most-likely prefix of those whose share of
    *their* mass reaches top_p (1 = no limit).
    Returns (V,) probabilities: the kept tokens renormalised to sum to 1, zeros elsewhere.
    """
    raise NotImplementedError("sampling_probs")


def draw(probs, u):
    """One draw by inverse CDF: u in [0, 1).

    Walk the tokens with probs > 0 from the most likely down (ties: lower id
    first) and return the first whose running sum exceeds u * sum(probs).
    """
    raise NotImplementedError("draw")


def sample(logits, temperature, top_k, top_p, seed, n):
    """n token ids drawn from sampling_probs(logits, temperature, top_k, top_p).

    Make one random generator from `seed` (e.g. np.random.default_rng(seed)) and
    draw n times with it: the same seed must give the same draws, and over many
    draws token i must come up about n * p_i times. Returns (n,) integers.
    """
    raise NotImplementedError("sample")
