"""Not Python: the grader must refuse it in one line, not crash."""


def rope(x, pos0, theta:
    return x
