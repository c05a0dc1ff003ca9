"""Writes a planted mistake: a reference solution with the edits of a mutation file.

    /usr/bin/python3 mutate.py SOLUTION MUTATION OUT

A mutation file holds one or more edits, each
    @@ replace
    <lines of the solution, which must occur exactly once>
    @@ with
    <the lines that take their place (none: deleted)>
    @@ end
and text outside the edits (what the mistake is) is ignored. So a planted
mistake is only its change, and it follows the solution when the rest of the
solution changes; an edit whose lines are no longer in the solution fails.
"""
import sys


def edits(text):
    out, mode, old, new = [], None, [], []
    for line in text.splitlines(keepends=True):
        tag = line.strip()
        if tag == "@@ replace":
            mode, old, new = "old", [], []
        elif tag == "@@ with":
            mode = "new"
        elif tag == "@@ end":
            out.append(("".join(old), "".join(new)))
            mode = None
        elif mode == "old":
            old.append(line)
        elif mode == "new":
            new.append(line)
    if mode is not None:
        raise SystemExit("mutate.py: an edit is not closed with '@@ end'")
    return out


def main():
    solution, mutation, target = sys.argv[1:4]
    text = open(solution, encoding="utf-8").read()
    changes = edits(open(mutation, encoding="utf-8").read())
    if not changes:
        raise SystemExit(f"mutate.py: {mutation} holds no edit")
    for old, new in changes:
        count = text.count(old)
        if count != 1:
            raise SystemExit(f"mutate.py: {mutation}: the lines to replace occur {count} times "
                             f"in {solution}, not once:\n{old}")
        text = text.replace(old, new)
    open(target, "w", encoding="utf-8").write(text)


main()
