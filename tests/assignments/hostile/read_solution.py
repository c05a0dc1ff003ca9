# Reads the assignment's solution.py to copy its answers. The repository is
# not visible while grading.
# expect: causal, small shapes +0/4 +FAIL \(read-only files\)
# expect: \(FileNotFoundError: \[Errno 2\] No such file or directory: '[^']*solution.py'


def causal_attention(q, k, v):
    scope = {}
    exec(open("@SOLUTION@").read(), scope)
    return scope["causal_attention"](q, k, v)
