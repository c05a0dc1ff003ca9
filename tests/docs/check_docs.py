"""The documentation tells the truth about the tree (issue 43).

A course tool is read before it is run: a broken link, a map row naming a function
that was renamed, or a checker marker where a number should be all send a student
the wrong way, and none of them breaks a build. These checks make them fail a test:

  readme_length  README.md is the front door: at most 300 lines.
  links          every relative link and image of every tracked .md file resolves,
                 and a #anchor into a .md file names one of its headings.
  map            the README's "## The map": every file it names exists and holds the
                 functions named beside it; every viewer scene and option exists.
  src_readme     src/README.md names every file under src/, and nothing else.
  no_markup      no checker markup ({{name}}, [[a..b]], [[gpu-form]], a "…" inside a
                 console line) is left where a reader sees it (outside <!-- -->).

Usage: check_docs.py REPO_ROOT [CHECK ...]   run the named checks (default: all)
       check_docs.py REPO_ROOT --self-test   plant one fault per check in a copy of the
                                             tree and require that each is reported
Standard library only (Debian's /usr/bin/python3). Exit 0 when every check passes.
"""
import functools
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
import urllib.parse

README_MAX_LINES = 300
# The runner's fixtures test the markup format itself, so they must show it.
MARKUP_EXEMPT = ("tests/lessons/runner_fixtures/",)
# The lesson runner's own definition of markup (tests/lessons/lesson_format.cpp).
MARKUP = re.compile(r"\{\{[A-Za-z_]\w*(~|=[^}]+)?\}\}|\[\[gpu-form\]\]"
                    r"|\[\[[-+0-9.eE]+\.\.[-+0-9.eE]+\]\]")
ELLIPSIS = "\u2026"


def tracked(root, pattern):
    """Files git tracks under `root` matching `pattern` (paths relative to root). A tree
    without .git (a source tarball, the self-test's copy) lists what is on disk."""
    if os.path.exists(os.path.join(root, ".git")):
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", pattern],
                             capture_output=True, text=True, check=True).stdout
        files = [f for f in out.split("\0") if f]
    else:
        rx = re.compile(re.escape(pattern).replace(r"\*", ".*") + "$")
        files = [os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                 for d, _, names in os.walk(root) for f in names]
        files = [f for f in files if rx.match(f)]
    return sorted(f for f in files if os.path.isfile(os.path.join(root, f)))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# --- What a reader sees of a Markdown file ----------------------------------------
FENCE = re.compile(r"^\s*(`{3,}(?=[^`]*$)|~{3,})\s*([\w+-]*)")
DELIMS = re.compile(r"<!--|`+")


def closing(run):
    """A code span opened by `run` closes at the next run of exactly as many backticks."""
    return re.compile(r"(?<!`)%s(?!`)" % run)


def scan(text):
    """Yields (line number, pieces, fence language) for every line a reader sees.
    pieces: ("text", s) prose or ("code", s) a code span or a line of a fenced block;
    HTML comments are dropped. A comment, and a code span within a paragraph, may go on
    over several lines. The language is None in prose, the fence's info word ("console",
    "sh", "" ...) inside a fenced block (whose fence lines are not yielded)."""
    lines = text.split("\n")
    fence, lang, code, in_comment = None, None, None, False
    for n, line in enumerate(lines, 1):
        if fence:
            if re.match(r"\s*%s{%d,}\s*$" % (fence[0], len(fence)), line):
                fence = None
            else:
                yield n, [("code", line)], lang
            continue
        m = FENCE.match(line)
        if m and not in_comment and not code:
            fence, lang = m.group(1), m.group(2)
            continue
        pieces, i = [], 0
        while i < len(line):
            if in_comment:  # a comment ends at the first "-->"
                end = line.find("-->", i)
                i, in_comment = (len(line), True) if end < 0 else (end + 3, False)
            elif code:  # in a code span, which may have opened on an earlier line
                close = closing(code).search(line, i)
                pieces.append(("code", line[i:close.start() if close else len(line)]))
                i, code = (close.end(), None) if close else (len(line), code)
            else:
                m = DELIMS.search(line, i)
                if not m:
                    pieces.append(("text", line[i:]))
                    break
                pieces.append(("text", line[i:m.start()]))
                i = m.end()
                # A run of backticks opens a code span only if as many close it before
                # the paragraph ends (at a blank line); otherwise it is just backticks.
                later = itertools.takewhile(str.strip, itertools.islice(lines, n, None))
                paragraph = [line[i:]] + list(later)
                if m.group() == "<!--":
                    in_comment = True
                elif any(closing(m.group()).search(l) for l in paragraph):
                    code = m.group()
                else:
                    pieces.append(("text", m.group()))
        yield n, pieces, None


def shown(pieces, code="`{}`"):
    """A line as it reads, each code span written with the `code` format."""
    return "".join(t if kind == "text" else code.format(t) for kind, t in pieces)


def slug(heading):
    """GitHub's anchor for a heading: lowercase, punctuation other than '-' and '_'
    dropped, each space a '-' ("On a real GPU: device-check.sh" ->
    "on-a-real-gpu-device-checksh")."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ "
                   or unicodedata.category(c).startswith("M"))
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    """Every heading's anchor; GitHub numbers a repeated one: x, x-1, x-2 ..."""
    seen, out = {}, set()
    for _, pieces, lang in scan(read(path)):
        m = re.match(r" {0,3}#{1,6}\s+(.*?)(\s+#+)?\s*$", shown(pieces, "{}"))
        if lang is None and m:
            s = slug(m.group(1))
            out.add(s if s not in seen else "%s-%d" % (s, seen[s]))
            seen[s] = seen.get(s, 0) + 1
    return out


LINK = re.compile(r"\]\(\s*<?([^()\s<>]+)>?(?:\s+\"[^\"]*\")?\s*\)")  # [text](t), ![alt](t)
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s<>]+)")  # [name]: target


def resolve(root, md, target):
    """The problem with a relative link's target, or None."""
    path, _, anchor = urllib.parse.unquote(target).partition("#")
    base = root if path.startswith("/") else os.path.dirname(os.path.join(root, md))
    dest = os.path.normpath(os.path.join(base, path.lstrip("/"))) if path else \
        os.path.join(root, md)
    if not os.path.exists(dest) or os.path.relpath(dest, root).startswith(".."):
        return "link to %s: no such file or folder" % target
    if anchor and dest.endswith(".md") and os.path.isfile(dest) and anchor not in anchors(dest):
        return "link to %s: %s has no heading with anchor #%s" % (
            target, os.path.relpath(dest, root), anchor)
    return None


# --- The checks: each returns (what it found, [problem "file:line: why", ...]) ---------
def check_readme_length(root):
    n = len(read(os.path.join(root, "README.md")).splitlines())
    bad = ["README.md:%d: the README has %d lines; the front door keeps to %d, the rest "
           "lives beside what it describes" % (README_MAX_LINES + 1, n, README_MAX_LINES)]
    return "README.md has %d lines (at most %d)" % (n, README_MAX_LINES), \
        bad if n > README_MAX_LINES else []


def check_links(root):
    """A link a reader can follow must land: prose only (code blocks, code spans and
    comments show link syntax, they do not link)."""
    files, count, problems = tracked(root, "*.md"), 0, []
    for md in files:
        for n, pieces, lang in scan(read(os.path.join(root, md))):
            line = shown(pieces, "CODE") if lang is None else ""
            for target in LINK.findall(line) + REFDEF.findall(line):
                if re.match(r"[A-Za-z][\w+.-]*:", target):  # http:, mailto: ... not followed
                    continue
                count += 1
                why = resolve(root, md, target)
                if why:
                    problems.append("%s:%d: %s" % (md, n, why))
    return "%d relative links and images in %d Markdown files" % (count, len(files)), problems


def split_row(line):
    """A table row's cells: split at each '|' not written '\\|'."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def table(text, start):
    """The rows (line number, cells) of the first table from line `start` on, the
    separator row left out."""
    rows = []
    for n, pieces, lang in scan(text):
        line = shown(pieces).strip()
        if n < start or lang is not None or (not line.startswith("|") and not rows):
            continue
        if not line.startswith("|"):
            break
        cells = split_row(line)
        if not all(re.fullmatch(r":?-*:?", c) for c in cells):
            rows.append((n, cells))
    return rows


def check_map(root):
    """The map is where a student starts reading code, so every pointer must land."""
    readme = read(os.path.join(root, "README.md"))
    at = [n for n, p, lang in scan(readme) if lang is None and shown(p).strip() == "## The map"]
    if not at:
        return "no map", ["README.md:1: no '## The map' heading"]
    rows = table(readme, at[0])
    header = [c.lower() for c in rows[0][1]] if rows else []
    col = {k: [i for i, c in enumerate(header) if k in c] for k in ("file", "scene")}
    if not rows or not col["file"] or not col["scene"]:
        return "no map", ["README.md:%d: no table with 'file' and 'scene' columns" % at[0]]
    # The scene names the viewer accepts: the rows of the scene table (the name
    # after each {Scene::kX, in viewer/app/scenes.cpp), which parse_scene reads.
    src = read(os.path.join(root, "viewer/app/scenes.cpp"))
    scenes = set(re.findall(r'\{Scene::k\w+,\s*"([^"]+)"', src))
    options = read(os.path.join(root, "viewer/app/options.cpp"))
    cli = "".join(read(os.path.join(root, f)) for f in tracked(root, "src/cli/*.cpp"))
    texts, problems, names = {}, [], 0
    for n, cells in rows[1:]:
        where = "README.md:%d: " % n
        current = None  # the file the names that follow are looked up in ("": missing)
        for span in re.findall(r"`([^`]+)`", cells[col["file"][0]]):
            if "/" in span:
                current = span
                if not os.path.isfile(os.path.join(root, span)):
                    problems.append(where + "map names %s, which does not exist" % span)
                    current = ""
                else:
                    texts.setdefault(span, read(os.path.join(root, span)))
            elif not re.fullmatch(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*", span):
                problems.append(where + "'%s' is neither a file nor a C++ name" % span)
            elif current is None:
                problems.append(where + "%s is named before any file" % span)
            elif current:
                names += 1
                for part in span.split("::"):  # Mask::visible: both Mask and visible
                    if not re.search(r"\b%s\b" % part, texts[current]):
                        problems.append(where + "%s is not in %s (%s)" % (part, current, span))
        scene = cells[col["scene"][0]]
        first = re.match(r"[`\s]*([^\s`,(]*)", scene).group(1)
        by_command = first == "\u2014"  # "—": a plab command teaches it, not a scene
        if first not in scenes and first not in ("any", "\u2014"):
            problems.append(where + "'%s' is not a viewer scene (the viewer has: %s)"
                            % (first, ", ".join(sorted(scenes)) or "none found"))
        for opt in re.findall(r"(?<![\w-])--[a-z][\w-]*", scene):
            if '"%s"' % opt not in (cli if by_command else options):
                problems.append(where + "%s is not an option of %s" % (
                    opt, "plab (src/cli)" if by_command else "plab-viewer (viewer/app/options.cpp)"))
    return "%d map rows, %d names looked up in %d files, scenes %s" % (
        len(rows) - 1, names, len(texts), "/".join(sorted(scenes))), problems


def check_src_readme(root):
    """src/README.md is the table of contents of the engine: a file it leaves out is a
    file nobody is told about; a file it names that is gone is a dead end."""
    text, named, heading, problems = read(os.path.join(root, "src/README.md")), set(), {}, []
    folder, in_files = "", False  # before the first "## folder" heading: src/ itself
    for n, pieces, lang in scan(text):
        line = shown(pieces).strip()
        if lang is not None:
            continue
        for target in LINK.findall(shown(pieces, "CODE")):  # a linked README counts too
            named.add(os.path.normpath(os.path.join("src", target.partition("#")[0])))
        m = re.match(r"##\s+`?([\w./-]+?)/?`?\s*$", line)
        if m:
            folder, heading[m.group(1)] = m.group(1), n
            if not os.path.isdir(os.path.join(root, "src", folder)):
                problems.append("src/README.md:%d: no folder src/%s" % (n, folder))
        cells = split_row(line)
        if not line.startswith("|"):
            in_files = False
        elif cells[0].lower() == "file":  # a table of files, not e.g. the backends'
            in_files = True
        elif in_files:
            for name in re.findall(r"`([^`]+)`", cells[0]):
                path = os.path.normpath(os.path.join("src", folder, name))
                named.add(path)
                if not os.path.isfile(os.path.join(root, path)):
                    problems.append("src/README.md:%d: names %s, which does not exist" % (n, path))
    files = [f for f in tracked(root, "src/*") if f != "src/README.md"]
    for f in files:
        if f not in named:
            sub = os.path.dirname(os.path.relpath(f, "src"))
            problems.append("src/README.md:%d: does not name %s (a row under '## %s')" % (
                heading.get(sub, 1), f, sub or "(top)"))
    return "%d files under src/, %d of them named in src/README.md" % (
        len(files), len(named & set(files))), problems


def check_no_markup(root):
    """The checks live in comments; a reader sees numbers, never the checker's markers."""
    files = [f for f in tracked(root, "*.md") if not f.startswith(MARKUP_EXEMPT)]
    problems = []
    for md in files:
        for n, pieces, lang in scan(read(os.path.join(root, md))):
            line = shown(pieces, "{}")
            m = MARKUP.search(line)
            if m:
                problems.append("%s:%d: checker markup %s is visible" % (md, n, m.group()))
            elif lang == "console" and ELLIPSIS in line and line.strip() != ELLIPSIS:
                problems.append("%s:%d: '%s' inside a console line hides what was printed "
                                "(only a line of '%s' alone may stand for left-out lines)"
                                % (md, n, ELLIPSIS, ELLIPSIS))
    bad = len({p.split(":")[0] for p in problems})
    return "%d Markdown files (%d with visible markup)" % (len(files), bad), problems


HISTORY = re.compile(r"\b[Ii]ssue [0-9]+")


def check_no_history(root):
    """Code comments say what the code does and why, not which issue brought it: a
    reader of src/, kernels/ or viewer/ has no issue tracker. History goes to the
    folder READMEs (and assets/bench/README.md for past timings)."""
    files = [f for d in ("src", "kernels", "viewer") for f in tracked(root, d + "/*")
             if not f.endswith(".md") and os.path.isfile(os.path.join(root, f))]
    problems = []
    for f in files:
        try:
            text = read(os.path.join(root, f))
        except UnicodeDecodeError:
            continue  # a binary file (a font, a picture) has no comments
        for n, line in enumerate(text.split("\n"), 1):
            m = HISTORY.search(line)
            if m:
                problems.append("%s:%d: '%s' tells history; say what the code does (history "
                                "goes to the folder's README)" % (f, n, m.group()))
    return "%d files under src/, kernels/, viewer/" % len(files), problems


CHECKS = {"readme_length": check_readme_length, "links": check_links, "map": check_map,
          "src_readme": check_src_readme, "no_markup": check_no_markup,
          "no_history": check_no_history}


def run(root, name):
    """Runs one check and prints what it found and each problem; True if it passed."""
    found, problems = CHECKS[name](root)
    print("[%s] %s: %s" % (name, found, "ok" if not problems else
                           "FAILED, %d problems" % len(problems)))
    for p in problems:
        print("  " + p)
    return not problems


# --- Self-test: every check can fail ------------------------------------------------
# Each fault is planted in a fresh copy of the tracked tree: (fault, check, file it goes
# in, lines planted, [(line offset, word)] that must be reported at the planted line,
# [(line offset, word)] that must not be; offset None: anywhere in the file). "MAP" plants
# a first row of the README's map, "LESSON" appends to lesson 1, a number pads the file to
# that many lines. Every copy also gets src/planted.h, which no README names.
FAULTS = [
    ("301-line README", "readme_length", "README.md", README_MAX_LINES + 1,
     [(None, "has %d lines" % (README_MAX_LINES + 1))], []),
    ("(none: a 300-line README passes)", "readme_length", "README.md", README_MAX_LINES,
     [], [(None, "")]),
    ("broken link", "links", "README.md", ["[gone](no/such/file.md)", "`[code](ignored.md)`",
                                           "```", "[fenced](ignored.md)", "```"],
     [(0, "no/such/file.md")], [(1, ""), (3, "")]),
    ("broken anchor", "links", "README.md", ["[x](#no-such-heading) [y](#the-map)"],
     [(0, "#no-such-heading")], [(0, "#the-map")]),
    ("function not in its file", "map", "MAP",
     ["| p | `src/planted.h`: `present_fn`, `Gone::no_such_fn` | - | `mask` |"],
     [(0, "no_such_fn"), (0, "Gone")], [(0, "present_fn")]),
    ("unknown scene", "map", "MAP", ["| p | `src/planted.h`: `present_fn` | - | `nosuch --bad` |"],
     [(0, "'nosuch' is not a viewer scene"), (0, "--bad")], []),
    ("src file not in src/README.md", "src_readme", "src/README.md",
     ["## toy", "", "| file | what |", "|---|---|", "| `gone.cpp` | planted |"],
     [(None, "does not name src/planted.h"), (4, "src/toy/gone.cpp")], []),
    ("visible {{x}} in a lesson", "no_markup", "LESSON",
     ["Shown: {{planted_x}} ms.", "<!-- hidden {{hidden_y}}", "-->"],
     [(0, "{{planted_x}}")], [(1, "")]),
    ("issue number in a code comment", "no_history", "src/core/error.h",
     ["// fixed in issue 12", "// the issue: 12 rows"], [(0, "issue 12")], [(1, "")]),
    ("inline \u2026 in a console block", "no_markup", "LESSON",
     ["```console", "$ plab toy", "planted " + ELLIPSIS + " line", ELLIPSIS, "```"],
     [(2, ELLIPSIS)], [(3, "")]),
]


def plant(root, target, planted):
    """Plants the lines; returns the file and the line number of the first one."""
    if target == "LESSON":
        target = next(f for f in tracked(root, "lessons/*.md") if re.match(r"lessons/0*1-", f))
    path = os.path.join(root, "README.md" if target == "MAP" else target)
    lines = read(path).split("\n")
    if lines[-1] == "":
        lines.pop()
    at = len(lines)
    if target == "MAP":  # after the map's header and separator rows
        at = next(i for i in range(lines.index("## The map"), len(lines))
                  if re.match(r"\|\s*:?-", lines[i])) + 1
    if isinstance(planted, int):
        planted = ["padding"] * (planted - len(lines))
    lines[at:at] = planted
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return os.path.relpath(path, root), at + 1


def self_test(root):
    ok = True
    with tempfile.TemporaryDirectory(prefix="check_docs.") as tmp:
        for i, (fault, check, target, planted, must, must_not) in enumerate(FAULTS):
            copy = os.path.join(tmp, str(i))
            for f in tracked(root, "*"):
                os.makedirs(os.path.dirname(os.path.join(copy, f)), exist_ok=True)
                shutil.copy(os.path.join(root, f), os.path.join(copy, f))
            with open(os.path.join(copy, "src/planted.h"), "w", encoding="utf-8") as f:
                f.write("int present_fn();\n")
            md, first = plant(copy, target, planted)
            _, problems = CHECKS[check](copy)

            def reported(offset, word):
                loc = md + ":" + ("" if offset is None else "%d:" % (first + offset))
                return any(p.startswith(loc) and word in p for p in problems)
            wrong = [("missed",) + m for m in must if not reported(*m)] + \
                    [("reported",) + m for m in must_not if reported(*m)]
            ok &= not wrong
            print("[self-test] %-32s -> %-13s %s" % (fault, check, "as expected" if not wrong else
                  "WRONG: %s at %s:%d+\n  problems: %s" % (wrong, md, first, problems)))
    print("[self-test] %s" % ("every planted fault was reported" if ok else "FAILED"))
    return ok


def main(argv):
    if len(argv) < 2 or not os.path.isdir(argv[1]):
        sys.exit(__doc__)
    root = os.path.abspath(argv[1])
    if argv[2:] == ["--self-test"]:
        return 0 if self_test(root) else 1
    names = argv[2:] or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        sys.exit("check_docs.py: unknown check %s (known: %s)" % (unknown, ", ".join(CHECKS)))
    results = [run(root, n) for n in names]  # every check runs, even after a failure
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
