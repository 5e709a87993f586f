#!/usr/bin/env bash
# Runs every test of the reliability matrix (rows A1-E10, listed in docs/reliability.md;
# a row's tests are named Test<ROW><Words>) and prints the matrix as a
# markdown table: row | test(s) | result | figure. Rows without a test are
# listed as "no test". Extra arguments go to go test, e.g.
#   scripts/matrix.sh                      # the race build, sizes scaled
#   JOBS_E2E_SCALE=1 scripts/matrix.sh     # the full sizes
#   scripts/matrix.sh -timeout 30m
#   scripts/matrix.sh --write              # also puts the table in docs/reliability.md
# The raw go test -json stream is kept in $MATRIX_JSON when that is set.
# Exits non-zero when a test failed or a package did not build.
set -uo pipefail
cd "$(dirname "$0")/.."
write=
if [ "${1:-}" = --write ]; then
	write=docs/reliability.md
	shift
fi
out=${MATRIX_JSON:-$(mktemp)}
[ -n "${MATRIX_JSON:-}" ] || trap 'rm -f "$out"' EXIT
go test -race -count=1 -json -run '^Test[A-E][0-9]+[A-Z]' "$@" ./... >"$out"
tests=$?
table=$(mktemp)
go run ./scripts/matrixreport <"$out" | tee "$table"
report=${PIPESTATUS[0]}
if [ -n "$write" ]; then
	# The table between the markers is replaced by this run's, dated.
	{
		echo "Run of $(date -u +%Y-%m-%d) ($(go env GOVERSION), $(nproc) CPUs):"
		echo
		cat "$table"
	} >"$table.dated"
	awk -v t="$table.dated" '
		/<!-- matrix:end -->/ { skip = 0 }
		!skip { print }
		/<!-- matrix:begin/ { while ((getline line < t) > 0) print line; skip = 1 }
	' "$write" >"$write.new" && mv "$write.new" "$write"
	rm -f "$table.dated"
fi
rm -f "$table"
if ((tests != 0 || report != 0)); then
	exit 1
fi
