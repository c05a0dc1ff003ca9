# An endless loop in the first function only; the other two are right. Each
# check has its own time limit: only causal_attention's checks fail.
# args: --timeout 2
# expect: causal, small shapes +0/4 +FAIL \(timed out\)
# expect: masks of plab mask's grammar +8/8 +pass
# expect: GQA: H query heads over Hkv K/V heads +6/6 +pass
# expect: timed out: check 'causal, small shapes' ran past its 2 s limit \(--timeout S\)
# expect: Score: 2 of 5 checks pass
import numpy as np


def causal_attention(q, k, v):
    while True:
        pass


def masked_attention(q, k, v, mask):
    s = (q.astype(np.float64) @ k.astype(np.float64).T) / np.sqrt(q.shape[1])
    s = np.where(mask == 1, s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


def gqa_attention(q, k, v):
    t, h, _ = q.shape
    group = h // k.shape[1]
    causal = np.tril(np.ones((t, t), dtype=np.int64))
    return np.stack([masked_attention(q[:, i], k[:, i // group], v[:, i // group], causal)
                     for i in range(h)], axis=1)
