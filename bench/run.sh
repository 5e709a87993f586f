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
#   bench/run.sh --only capture,queue
#                           only the workloads named (jobsbench's, queue, grep)
#   bench/run.sh --against REV [--only versus]
#                           also run capture and the many-jobs workload with
#                           jobs built from git revision REV, in the same run,
#                           and report this build / that build
#
# Size knobs (environment): BENCH_CAPTURE_BYTES (e.g. 256MiB), BENCH_START_RUNS,
# BENCH_POLL_RUNS, BENCH_CONC_JOBS, BENCH_CONC_RATE, BENCH_CONC_SECS,
# BENCH_HISTORY_JOBS, BENCH_HISTORY_EVENTS, BENCH_HISTORY_EXPIRE, BENCH_HISTORY_RUNS,
# BENCH_KILL_TRIALS, BENCH_QUEUE_JOBS, BENCH_WAIT_SECS, BENCH_GREP_BYTES (the log
# `jobs log --grep` searches: 1GiB in the full mode, 64MiB with --quick; 0
# leaves the part out). Run the full mode on a quiet machine (see `uptime`).
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
go build -o "$bin/pipefile" ./bench/cmd/pipefile
CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$bin/linked" ./bench/cmd/linked
CGO_ENABLED=0 go build -tags urfave_cli_no_docs,nomcp -o "$bin/linked-nomcp" ./bench/cmd/linked

if [ -n "$against" ]; then
	rev=$(git rev-parse --short "$against^{commit}") || { echo "bench/run.sh: no such revision: $against" >&2; exit 2; }
	mkdir "$bin/base-src"
	git archive "$rev" | tar -x -C "$bin/base-src"
	(cd "$bin/base-src" && CGO_ENABLED=0 go build -tags urfave_cli_no_docs -o "$bin/jobs-base" .)
	export JOBS_BASE_BIN="$bin/jobs-base" JOBS_BASE_REV="$rev"
fi

# --only LIST names the workloads to run: jobsbench's, and this script's
# own queue and grep parts; the parts not named are left out.
only=""
bench_args=()
for ((i = 0; i < ${#args[@]}; i++)); do
	case "${args[i]}" in
	--only | -only)
		only=${args[i + 1]:-}
		i=$((i + 1))
		;;
	*) bench_args+=("${args[i]}") ;;
	esac
done
wants() { [ -z "$only" ] || [[ ",${only// /}," == *",$1,"* ]]; }
rest=""
IFS=, read -ra named <<<"${only// /}"
for w in ${named[@]+"${named[@]}"}; do
	case $w in queue | grep) ;; *) rest=${rest:+$rest,}$w ;; esac
done

mkdir -p bench/out
if [ -z "$only" ]; then
	JOBS_BIN="$bin/jobs" "$bin/jobsbench" run -out bench/out/results.md ${bench_args[@]+"${bench_args[@]}"}
elif [ -n "$rest" ]; then
	JOBS_BIN="$bin/jobs" "$bin/jobsbench" run -out bench/out/results.md --only "$rest" ${bench_args[@]+"${bench_args[@]}"}
else
	: >bench/out/results.md
fi

# Queued against plain starts: the same number of short jobs (true), once
# started plainly and once through a queue of parallel 2, each in a fresh
# database with its own supervisor; what the supervisor spent (user+system
# CPU from /proc, its start-up included) from the first start until every
# job ended. A queued job costs a claim and, while jobs wait, a look at the
# queue every half second.
queue_jobs=${BENCH_QUEUE_JOBS:-100}
for a in ${args[@]+"${args[@]}"}; do
	[ "$a" = --quick ] && queue_jobs=${BENCH_QUEUE_JOBS:-20}
done
tick=$(getconf CLK_TCK)
queue_run() { # queue_run plain|queued → "cpu_ms wall_ms"
	local dir db pid start end t0 t1 i
	dir=$(mktemp -d "${TMPDIR:-/tmp}/jobsbench-q.XXXXXX")
	db=$dir/jobs.db
	export JOBS_DB=$db XDG_RUNTIME_DIR=$dir/run
	local q=()
	if [ "$1" = queued ]; then
		"$bin/jobs" queue bench --parallel 2 >/dev/null
		q=(--queue bench)
	fi
	t0=$(date +%s%N)
	for ((i = 0; i < queue_jobs; i++)); do
		"$bin/jobs" start ${q[@]+"${q[@]}"} true >/dev/null 2>&1
	done
	while "$bin/jobs" --json list --status active --limit 1 | grep -q '"id"'; do
		sleep 0.05
	done
	t1=$(date +%s%N)
	pid=$(ps -eo pid=,args= | awk -v a="$bin/jobs supervise --db $db" '{p=$1; $1=""; sub(/^ /, "")} $0 == a {print p}')
	read -r start end < <(awk '{print $14, $15}' "/proc/$pid/stat")
	echo "$(((start + end) * 1000 / tick)) $(((t1 - t0) / 1000000))"
	kill "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	rm -rf "$dir"
	unset JOBS_DB XDG_RUNTIME_DIR
}
if wants queue; then
	read -r plain_cpu plain_wall < <(queue_run plain)
	read -r queued_cpu queued_wall < <(queue_run queued)
	{
		echo
		echo "### Queue: $queue_jobs jobs (true) through a queue of parallel 2 against $queue_jobs plain starts"
		echo
		echo "| run | supervisor CPU (ms) | wall (ms) |"
		echo "| --- | ---: | ---: |"
		echo "| $queue_jobs plain starts | $plain_cpu | $plain_wall |"
		echo "| $queue_jobs queued, parallel 2 | $queued_cpu | $queued_wall |"
	} | tee -a bench/out/results.md
fi

# --grep over a large log: jobs log ID --grep searches the whole stored log a
# page at a time; its time and peak memory are set against grep -c on the
# same bytes (the file the job printed), measured in the same run.
grep_bytes=${BENCH_GREP_BYTES:-1GiB}
for a in ${args[@]+"${args[@]}"}; do
	[ "$a" = --quick ] && grep_bytes=${BENCH_GREP_BYTES:-64MiB}
done
case "$grep_bytes" in
*GiB) grep_n=$((${grep_bytes%GiB} << 30)) ;;
*MiB) grep_n=$((${grep_bytes%MiB} << 20)) ;;
*) grep_n=$grep_bytes ;;
esac
if [ "$grep_n" -gt 0 ] && wants grep; then
	scratch=$(mktemp -d "${TMPDIR:-/tmp}/jobsbench-grep.XXXXXX")
	trap 'rm -rf "$bin" "$scratch"' EXIT
	mkdir -p "$scratch/state" "$scratch/run" "$scratch/config"
	export XDG_STATE_HOME="$scratch/state" XDG_RUNTIME_DIR="$scratch/run" XDG_CONFIG_HOME="$scratch/config"
	# Lines of 64 bytes; one in a thousand holds ERROR.
	awk -v n="$grep_n" 'BEGIN { for (i = 1; i * 64 <= n; i++) printf "%s line %09d padding padding padding padding padding .\n", (i % 1000 == 7 ? "ERROR" : "info "), i }' >"$scratch/log"
	size=$(stat -c %s "$scratch/log")
	id=$("$bin/jobs" start --max-output 0 --timeout 0 --ttl 0 -- cat "$scratch/log")
	"$bin/jobs" wait "$id" >/dev/null
	measure() { # prints "wall-seconds peak-KiB cpu-seconds" of the command, its stdout to $scratch/out
		/usr/bin/time -f '%e %M %U %S' -o "$scratch/time" "$@" >"$scratch/out" 2>"$scratch/err"
		awk '{ printf "%s %s %.2f\n", $1, $2, $3 + $4 }' "$scratch/time"
	}
	read -r jt jm jcpu <<<"$(measure "$bin/jobs" log "$id" --grep ERROR --lines 1)"
	jc=$(grep -o '[0-9]* lines matched' "$scratch/err" | cut -d' ' -f1)
	read -r gt gm gcpu <<<"$(measure grep -c ERROR "$scratch/log")"
	gc=$(cat "$scratch/out")
	"$bin/jobs" kill --all >/dev/null 2>&1 || true
	{
		echo
		echo "### jobs log --grep over a $((size >> 20)) MiB log"
		echo
		echo "| command | matches | wall (s) | CPU (s) | peak RSS (MiB) |"
		echo "| --- | ---: | ---: | ---: | ---: |"
		echo "| jobs log ID --grep ERROR | $jc | $jt | $jcpu | $((jm / 1024)) |"
		echo "| grep -c ERROR (same bytes, from a file) | $gc | $gt | $gcpu | $((gm / 1024)) |"
	} | tee -a bench/out/results.md
	[ "$jc" = "$gc" ] || { echo "bench/run.sh: jobs log --grep found $jc matches, grep -c $gc" >&2; exit 1; }
fi
