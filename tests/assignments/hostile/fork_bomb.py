# A fork bomb: every process forks forever. Contained by the process limit,
# counted inside the sandbox's own user namespace.
# expect: causal, small shapes +0/4 +FAIL \(process limit\)
# expect: process limit 64 reached \(BlockingIOError
import os


def causal_attention(q, k, v):
    while True:
        os.fork()
