# Rewrites the files of its working directory (its own submission) so a
# regrade would see other code. The stage is read-only.
# expect: causal, small shapes +0/4 +FAIL \(read-only files\)
# expect: \(OSError: \[Errno 30\] Read-only file system
import os


def causal_attention(q, k, v):
    for name in os.listdir("."):
        open(name, "w").write("def causal_attention(q, k, v):\n    return q\n")
