#!/bin/sh
# Grades a class: every submission in DIR (NAME.py, or NAME.cpp for a C++ variant)
# with `plab grade-class`, two at a time; one CSV row a file on stdout.
#   PLAB=build/plab lessons/assignments/grade_class.sh attention submissions/ > scores.csv
# More arguments go to plab grade-class: --jobs N, --csv OUT (rows into OUT; run
# again after a stop to grade the rest), plab grade's --timeout S and others.
# Each file's report lands beside it: NAME.json (the checks), NAME.err (a file that
# does not import or compile: plab's one line, also in the CSV's error column).
set -eu
if [ $# -lt 2 ]; then
    echo "usage: PLAB=build/plab $0 ASSIGNMENT DIR [plab grade-class options] > scores.csv" >&2
    exit 2
fi
assignment=$1 dir=$2
shift 2
exec "${PLAB:-plab}" grade-class "$assignment" "$dir" "$@"
