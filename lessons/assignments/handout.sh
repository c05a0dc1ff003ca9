#!/bin/sh
# Writes the assignments for students into DIR (`make handout DIR=PATH`): this
# folder as it is, without any solution.* file (the reference answers stay in
# the repository) and without this script; then checks that no solution is
# left. DIR must be new or empty, so nothing of an earlier handout lingers.
set -eu
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "handout: give the folder to write, e.g. make handout DIR=~/course/assignments" >&2
  exit 1
fi
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
if [ -e "$dir" ] && [ -n "$(ls -A "$dir")" ]; then
  echo "handout: $dir exists and is not empty; give a new or empty folder" >&2
  exit 1
fi
mkdir -p "$dir"
(cd "$here" && find . -type f ! -name 'solution.*' ! -name 'handout.sh' \
   ! -path '*/__pycache__/*' -print) | while read -r f; do
  mkdir -p "$dir/$(dirname "$f")"
  cp "$here/$f" "$dir/$f"
done
left=$(find "$dir" -name 'solution.*')
if [ -n "$left" ]; then
  echo "handout: solution files left in $dir: $left" >&2
  exit 1
fi
echo "wrote $(find "$dir" -type f | wc -l) files into $dir, no solution.* among them (starters: $(find "$dir" -name 'starter.*' | wc -l))"
