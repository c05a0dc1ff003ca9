# Prints forever. Contained by the output limit: the whole file stops there.
# expect: causal, small shapes +0/4 +FAIL \(output limit\)
# expect: output limit 8 MiB exceeded: your code printed more than that


def causal_attention(q, k, v):
    while True:
        print("x" * 1000)
