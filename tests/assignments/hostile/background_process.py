# Starts a process in a session of its own that would outlive the grader and
# then touch the decoy. It ends with the sandbox.
# expect: causal, small shapes +0/4 +FAIL
# expect: your function returned None
import subprocess


def causal_attention(q, k, v):
    subprocess.Popen(["sh", "-c", "sleep 20; touch @DECOY@/late.txt # @MARKER@"],
                     start_new_session=True)
