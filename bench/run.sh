#!/usr/bin/env bash
# The benchmark harness: measures jobs against its baselines (task-spooler,
# tmux, nohup, raw SQLite inserts, cat, tail) on the same workloads in one
# run, prints a markdown table and writes it to bench/out/results.md.
#
#   bench/run.sh            full run (1 GiB capture, 100 jobs × 10 s, history of
#                           200,000 jobs and a million events, 100,000 expired
#                           jobs; several minutes, about 2 GiB of scratch space)
#   bench/run.sh --quick    CI smoke run (64 MiB, 20 jobs × 3 s, 20,000-job history;
#                           about a minute)
#   bench/run.sh --against REV [--only versus]
#                           also run capture and the many-jobs workload with
#                           jobs built from git revision REV, in the same run,
#                           and report this build / that build
#
# Size knobs (environment): BENCH_CAPTURE_BYTES (e.g. 256MiB), BENCH_START_RUNS,
# BENCH_POLL_RUNS, BENCH_CONC_JOBS, BENCH_CONC_RATE, BENCH_CONC_SECS,
# BENCH_HISTORY_JOBS, BENCH_HISTORY_EVENTS, BENCH_HISTORY_EXPIRE, BENCH_HISTORY_RUNS,
# BENCH_KILL_TRIALS, BENCH_WAIT_SECS. Run the full mode on a quiet machine (see `uptime`).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v tsp >/dev/null && ! command -v ts >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "installing task-spooler (a baseline)" >&2
		export DEBIAN_FRONTEND=noninteractive
		apt-get install -y -qq task-spooler >/dev/null 2>&1 ||
			{ apt-get update -qq && apt-get install -y -qq task-spooler >/dev/null; } ||
			echo "task-spooler not installed: its row is left out" >&2
	else
		echo "task-spooler (tsp) missing: its row is left out" >&2
	fi
fi

against=""
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--against | -against)
		[ $# -ge 2 ] || { echo "bench/run.sh: --against needs a git revision" >&2; exit 2; }
		against=$2
		shift 2
		;;
	*)
		args+=("$1")
		shift
		;;
	esac
done

bin=$(mktemp -d "${TMPDIR:-/tmp}/jobsbench-bin.XXXXXX")
trap 'rm -rf "$bin"' EXIT
# Built as the README builds it: static (no cgo resolver to link) and
# without urfave/cli's doc generator, each about 1 ms off every command.
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$bin/jobs" .
go build -o "$bin/jobsbench" ./bench/cmd/jobsbench
go build -o "$bin/noop" ./bench/cmd/noop
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$bin/linked" ./bench/cmd/linked
CGO_ENABLED=0 go build -tags urfave_cli_no_docs,nomcp -o "$bin/linked-nomcp" ./bench/cmd/linked

if [ -n "$against" ]; then
	rev=$(git rev-parse --short "$against^{commit}") || { echo "bench/run.sh: no such revision: $against" >&2; exit 2; }
	mkdir "$bin/base-src"
	git archive "$rev" | tar -x -C "$bin/base-src"
	(cd "$bin/base-src" && CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$bin/jobs-base" .)
	export JOBS_BASE_BIN="$bin/jobs-base" JOBS_BASE_REV="$rev"
fi

mkdir -p bench/out
JOBS_BIN="$bin/jobs" "$bin/jobsbench" run -out bench/out/results.md ${args[@]+"${args[@]}"}
