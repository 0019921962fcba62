#!/usr/bin/env bash
# check_sizes.sh SRCROOT [LIMIT] — C sources outside tests/ longer than LIMIT lines (default
# 600) are findings to justify, not a wall to squeeze under. A file is sized by its
# responsibility: one that is long because its one job is long stays whole and is named in
# JUSTIFIED below with the reason; one that has grown a second job is split where the jobs
# part. Fails on a file over LIMIT that the list does not name, and on a stale entry (a file
# the list names that is no longer over LIMIT, or no longer there): the list stays short
# and true. Prints each finding, justified ones included.
set -u
root=$1 limit=${2:-600}

# path<TAB>why it is one responsibility at this size (one line each; keep the list short)
JUSTIFIED=$(cat <<'EOF'
EOF
)

cd "$root" || exit 2
sources() { # the C sources outside tests/: git's list in a checkout, else every file
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files '*.c' '*.h' '*.cu' | grep -v '^tests/'
	else
		find . -path ./tests -prune -o \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -print
	fi
}
declare -A why=()
while IFS=$'\t' read -r f reason; do
	[ -n "$f" ] && why[$f]=$reason
done <<<"$JUSTIFIED"

bad=0 over=0
declare -A seen=()
for f in "${!why[@]}"; do
	if [ -z "${why[$f]// /}" ]; then
		echo "FAIL: JUSTIFIED names $f without a reason (path, a TAB, then the reason)"
		bad=$((bad + 1))
	fi
done
while IFS= read -r f; do
	f=${f#./}
	n=$(wc -l <"$f")
	[ "$n" -gt "$limit" ] || continue
	over=$((over + 1))
	seen[$f]=1
	if [ -n "${why[$f]+x}" ]; then
		echo "justified: $f: $n lines (limit $limit): ${why[$f]}"
	else
		echo "FAIL: $f: $n lines (limit $limit), not justified: split it where its jobs part," \
			"or name it in JUSTIFIED in $0 with the reason it is one job"
		bad=$((bad + 1))
	fi
done < <(sources)
for f in "${!why[@]}"; do
	if [ -z "${seen[$f]+x}" ]; then
		echo "FAIL: stale entry in JUSTIFIED: $f is not over $limit lines (or is gone): drop it"
		bad=$((bad + 1))
	fi
done
echo "$over file(s) over $limit lines, ${#why[@]} justified, $bad failure(s)"
[ "$bad" -eq 0 ]
