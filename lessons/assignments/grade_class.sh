#!/bin/sh
# Grades a class: every submission in DIR (NAME.py, or NAME.cpp for a C++ variant)
# with `plab grade ASSIGNMENT FILE --json`; one CSV row a file on stdout.
#   PLAB=build/plab lessons/assignments/grade_class.sh attention submissions/ > scores.csv
# Each file's report lands beside it: NAME.json (the checks), NAME.err (a file that
# does not import or compile: plab's one line, also in the CSV's last column).
set -u
assignment=$1 dir=$2 plab=${PLAB:-plab}
echo "file,score,checks_passed,checks,error"
for f in "$dir"/*.py "$dir"/*.cpp; do
    [ -e "$f" ] || continue
    "$plab" grade "$assignment" "$f" --json --timeout 60 > "${f%.*}.json" 2> "${f%.*}.err"
    /usr/bin/python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(sys.argv[2], d["score"], d["checks_passed"], len(d["checks"]), "", sep=",")' \
        "${f%.*}.json" "$(basename "$f")" 2> /dev/null ||
        echo "$(basename "$f"),0,0,,\"$(head -n 1 "${f%.*}.err" | sed 's/"/""/g')\""
done
