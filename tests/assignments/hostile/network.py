# Sends the cases to a server on the grader's machine (127.0.0.1, where the
# test listens). The sandbox has a network of its own with nothing on it.
# expect: causal, small shapes +0/4 +FAIL \(no network\)
# expect: network is not available while grading \(ConnectionRefusedError
import socket


def causal_attention(q, k, v):
    with socket.create_connection(("127.0.0.1", @PORT@), timeout=5) as s:
        s.sendall(q.tobytes())
