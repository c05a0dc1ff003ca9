# Deletes a folder of the grader's (a decoy) with a shell, then marks it. The
# folder is not visible in the sandbox: rm finds nothing, the mark fails.
# expect: causal, small shapes +0/4 +FAIL \(read-only files\)
# expect: only /tmp can be written
import os


def causal_attention(q, k, v):
    os.system("rm -rf @DECOY@")
    open("@DECOY@/deleted.txt", "w").write("gone\n")
