#!/usr/bin/env bash
# check_sizes.sh SRCROOT [LIMIT] — no C source outside tests/ longer than LIMIT lines
# (default 600): one responsibility per file. Prints each offender.
set -u
root=$1 limit=${2:-600} bad=0
cd "$root" || exit 2
while IFS= read -r f; do
	n=$(wc -l <"$f")
	if [ "$n" -gt "$limit" ]; then echo "$f: $n lines (limit $limit)"; bad=$((bad + 1)); fi
done < <(git ls-files '*.c' '*.h' '*.cu' 2>/dev/null | grep -v '^tests/' ||
	find . -path ./tests -prune -o \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -print)
echo "$bad file(s) over $limit lines"
[ "$bad" -eq 0 ]
