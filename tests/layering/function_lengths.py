#!/usr/bin/env python3
"""The longest functions of the tree, counted as a reader counts them.

    function_lengths.py ROOT [--top N] [--max N] [--dirs src viewer ...]
    function_lengths.py --self-test FIXTURE

A function's length is its lines of code from the line of its opening brace to
its closing one, without blank lines and lines that hold only a comment: what a
slide has to hold. Lambdas and local classes count toward the function they sit
in. The reader is a brace matcher over the text with strings, characters and
comments blanked out, not a C++ parser: a brace opens a function when the text
before it, back to the previous ';', '{' or '}', ends in a parameter list
(')', then optionally const, noexcept, override, final, '-> type', or a
constructor's ': member(init)' list) and is not a control statement's.
`make longest-functions` prints the longest ten of src/ and viewer/
(kernels/ and tests/ are left out: the kernel ladder splits the kernels).
With --max N it fails (exit 1) when a function is longer than N, naming each:
the test `function_lengths.within_the_limit` holds the tree to 100.
"""
import os
import re
import sys

SOURCES = (".cpp", ".h", ".cc", ".hpp")
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype"}


def blank_out(text):
    """The text with comments, strings and character literals replaced by spaces
    (newlines kept), and a per-line flag: does the line hold code?"""
    out = []
    i, n = 0, len(text)
    code_on_line = [False]
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            for _ in range(text.count("\n", i, j)):
                code_on_line.append(False)
            i = j
        elif text.startswith('R"', i) and re.match(r'R"([^(\s]*)\(', text[i:]):
            delim = re.match(r'R"([^(\s]*)\(', text[i:]).group(1)
            j = text.find(")" + delim + '"', i)
            j = n if j < 0 else j + len(delim) + 2
            seg = text[i:j]
            out.append("".join(ch if ch == "\n" else "s" for ch in seg))
            code_on_line[-1] = True
            for _ in range(seg.count("\n")):
                code_on_line.append(True)
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append("s" * (min(j + 1, n) - i))
            code_on_line[-1] = True
            i = j + 1
        else:
            out.append(c)
            if c == "\n":
                code_on_line.append(False)
            elif not c.isspace():
                code_on_line[-1] = True
            i += 1
    return "".join(out), code_on_line


SIGNATURE_END = re.compile(
    r"\)\s*(?:const\s*|noexcept(?:\([^)]*\))?\s*|override\s*|final\s*|mutable\s*|&\s*|&&\s*)*"
    r"(?:->\s*[\w:<>,\s*&]+)?$")
INIT_LIST = re.compile(r"\)\s*(?:noexcept\s*)?:\s*[\w:]+\s*[({].*$", re.S)


def function_name(head):
    """The name before the parameter list: `Class::method`, `run`, `operator()`."""
    depth, k = 0, len(head) - 1
    # Find the '(' that opens the (outermost trailing) parameter list.
    while k >= 0:
        if head[k] == ")":
            depth += 1
        elif head[k] == "(":
            depth -= 1
            if depth == 0:
                m = re.search(r"([~\w:]+(?:operator\s*\S+?)?)\s*$", head[:k])
                return m.group(1) if m else None
        k -= 1
    return None


def functions(path):
    """(name, first line, code lines) of each function in the file."""
    text = open(path, encoding="utf-8", errors="replace").read()
    code, has_code = blank_out(text)
    found = []
    stack = []  # per open brace: ("fn", name, line) or ("scope",) or ("block",)
    last_stop = 0
    line = 1
    fn_depth = None
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c in ";":
            if fn_depth is None:
                last_stop = i + 1
        elif c == "{":
            if fn_depth is None:
                head = code[last_stop:i].strip()
                kind = ("scope",)
                if INIT_LIST.search(head) and re.search(r"\w\s*$", head):
                    stack.append(("init",))  # a member brace-initialised: name_{...}
                    continue
                if re.search(r"\b(namespace|class|struct|union|enum)\b[^()]*$", head) or \
                        re.search(r"\bextern\s+s+$", head):
                    kind = ("scope",)
                elif SIGNATURE_END.search(head) or INIT_LIST.search(head):
                    name = function_name(head if SIGNATURE_END.search(head)
                                         else head[:INIT_LIST.search(head).start() + 1])
                    first = re.match(r"\s*(\w+)", head)
                    if name and name.split("::")[-1] not in CONTROL and \
                            not (first and first.group(1) in CONTROL):
                        kind = ("fn", name, line)
                        fn_depth = len(stack)
                stack.append(kind)
            else:
                stack.append(("block",))
            last_stop = i + 1
        elif c == "}":
            if not stack:
                continue
            kind = stack.pop()
            if kind[0] == "init":
                continue
            if kind[0] == "fn" and fn_depth == len(stack):
                lines = sum(1 for k in range(kind[2], line + 1) if has_code[k - 1])
                found.append((kind[1], kind[2], lines))
                fn_depth = None
            if fn_depth is None:
                last_stop = i + 1
    return found


def scan(root, dirs):
    rows = []
    for d in dirs:
        for base, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith(SOURCES):
                    path = os.path.join(base, f)
                    for name, first, n in functions(path):
                        rows.append((n, os.path.relpath(path, root), first, name))
    return sorted(rows, key=lambda r: (-r[0], r[1], r[2]))


def self_test(fixture):
    """The fixture marks each function with `// expect NAME LINES`; all must match."""
    want = {}
    for m in re.finditer(r"//\s*expect\s+(\S+)\s+(\d+)", open(fixture, encoding="utf-8").read()):
        want[m.group(1)] = int(m.group(2))
    got = {name: n for name, _, n in functions(fixture)}
    ok = got == want
    for name in sorted(set(want) | set(got)):
        print("%-28s expected %-5s counted %s%s" % (name, want.get(name), got.get(name),
                                                    "" if want.get(name) == got.get(name)
                                                    else "   <- WRONG"))
    print("function_lengths self-test: %s" % ("every function counted as marked" if ok
                                               else "FAILED"))
    return ok


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        return 0 if self_test(argv[2]) else 1
    if len(argv) < 2:
        print(__doc__)
        return 2
    root, top, limit, dirs = argv[1], 10, None, ["src", "viewer"]
    args = argv[2:]
    if "--top" in args:
        top = int(args[args.index("--top") + 1])
    if "--max" in args:
        limit = int(args[args.index("--max") + 1])
    if "--dirs" in args:
        dirs = args[args.index("--dirs") + 1:]
    rows = scan(root, dirs)
    print("The %d longest functions of %s (lines of code, comments and blank lines not "
          "counted; the house's limit is 100):" % (top, ", ".join(d + "/" for d in dirs)))
    for n, path, first, name in rows[:top]:
        print("  %4d  %s:%d  %s" % (n, path, first, name))
    over = sum(1 for r in rows if r[0] > 100)
    print("%d functions in all, %d over 100 lines" % (len(rows), over))
    if limit is not None:
        long = [r for r in rows if r[0] > limit]
        for n, path, first, name in long:
            print("%s:%d: %s is %d lines of code, more than %d: split it by job" %
                  (path, first, name, n, limit))
        return 1 if long else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
