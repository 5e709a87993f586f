#!/usr/bin/env bash
# Drive `jobs mcp` with a real third-party MCP client, the MCP inspector's
# command-line mode: list the tools, then call each tool and every process
# action once, checking the answers with grep. Exits non-zero on the first
# run of failures, printing what it got.
#
#   scripts/mcp-inspector-check.sh [path/to/jobs]
#
# Without an argument it builds jobs into a temporary directory. Needs node;
# it runs the inspector that scripts/deps.sh installs in e2e/mcpclient
# (locked there), else the newest through npx.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
sup=""
cleanup() {
	if [ -n "$sup" ]; then kill "$sup" 2>/dev/null || true; wait "$sup" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

jobs=${1:-}
if [ -z "$jobs" ]; then
	jobs=$tmp/jobs
	go build -o "$jobs" .
fi
case $jobs in /*) ;; *) jobs=$PWD/$jobs ;; esac

state=$tmp/state
run=$tmp/run
mkdir -p "$state" "$run"
chmod 700 "$run"
# The inspector starts the server with a minimal environment; pass ours.
env_args=(-e "XDG_STATE_HOME=$state" -e "XDG_RUNTIME_DIR=$run" -e "JOBS_SCOPE=inspector")

# Our own supervisor, so that nothing outlives the script: `jobs mcp` finds
# it instead of starting a detached one.
XDG_STATE_HOME=$state XDG_RUNTIME_DIR=$run "$jobs" supervise --idle 0 </dev/null >"$tmp/supervise.log" 2>&1 &
sup=$!
for _ in $(seq 100); do
	if ls "$run"/jobs/*/default.sock >/dev/null 2>&1; then break; fi
	if ! kill -0 "$sup" 2>/dev/null; then
		echo "FAIL jobs supervise exited:"; cat "$tmp/supervise.log"; exit 1
	fi
	sleep 0.05
done

# The inspector locked in e2e/mcpclient (scripts/deps.sh installs it),
# else the newest from npm through npx: the same client, but npx costs a
# second or more of resolving on each of the calls below.
inspector=(npx -y @modelcontextprotocol/inspector --cli)
local_inspector=e2e/mcpclient/node_modules/.bin/mcp-inspector
if [ -x "$local_inspector" ]; then
	inspector=("$PWD/$local_inspector" --cli)
fi
out=""
fail=0

# call ARGS…: run one inspector request; its output goes to $out.
call() {
	out=$("${inspector[@]}" "${env_args[@]}" "$jobs" mcp "$@" 2>&1) || true
}

# expect NAME ERE: check that $out matches the extended regex.
expect() {
	if printf '%s\n' "$out" | grep -Eq -- "$2"; then
		echo "ok   $1"
	else
		echo "FAIL $1: no match for /$2/ in:"
		printf '%s\n' "$out" | sed -n '1,40p' | sed 's/^/    /'
		fail=1
	fi
}

tool() { call --method tools/call --tool-name "$@"; }
process() { tool process "$@"; }

call --method tools/list
expect "tools/list names execute_command" '"name": "execute_command"'
expect "tools/list names process" '"name": "process"'
expect "tools/list names kill_process" '"name": "kill_process"'

tool execute_command --tool-arg 'command=echo inspector-hello'
expect "execute_command runs to the end" '"status": "done"'
expect "execute_command returns the output" 'inspector-hello'

# The job must still run when the kill below comes: each call starts the
# inspector (a node process), and on a busy machine the dozen calls before
# the kill took more than 30 s. The kill, or our supervisor's end, ends it.
tool execute_command --tool-arg 'command=read line; echo "got $line"; sleep 600' --tool-arg background=true --tool-arg label=inspector
expect "execute_command background=true starts" '"status": "running"'
sid=$(printf '%s\n' "$out" | grep -oE '"sessionId": ?"[A-Za-z0-9_-]+"' | head -n 1 | sed -E 's/.*"([A-Za-z0-9_-]+)"$/\1/' || true)
if [ -z "$sid" ]; then
	echo "FAIL no sessionId in the background start's answer"
	exit 1
fi
echo "     sessionId $sid"

process --tool-arg action=list
expect "process list shows the job" "\"sessionId\": ?\"$sid\""
process --tool-arg action=poll --tool-arg "sessionId=$sid"
expect "process poll gives retry_in_ms" '"retry_in_ms": ?[0-9]+'
process --tool-arg action=status --tool-arg "sessionId=$sid"
expect "process status gives the history" '"history"'
process --tool-arg action=write --tool-arg "sessionId=$sid" --tool-arg data=hello --tool-arg eof=true
expect "process write closes stdin" '"stdin_closed": ?true'
process --tool-arg action=wait --tool-arg "sessionId=$sid" --tool-arg 'until=got hello' --tool-arg timeout=20
expect "process wait until matches" '"wait_reason": ?"matched"'
process --tool-arg action=log --tool-arg "sessionId=$sid" --tool-arg offset=0
expect "process log pages the output" 'got hello'
process --tool-arg action=send_keys --tool-arg "sessionId=$sid" --tool-arg 'keys=["Enter"]'
expect "process send_keys refuses a pipe job" 'is not a tmux job'
process --tool-arg action=capture --tool-arg "sessionId=$sid"
expect "process capture refuses a pipe job" 'is not a tmux job'
process --tool-arg action=kill --tool-arg "sessionId=$sid"
expect "process kill ends the job (OpenClaw's documents)" '"status": ?"killed"'
tool kill_process --tool-arg "sessionId=$sid"
expect "kill_process on the killed job is a no-op" '"status": ?"killed"'
tool kill_process --tool-arg action=clear --tool-arg "sessionId=$sid"
expect "kill_process clear drops the output" '"cleared": ?true'
tool kill_process --tool-arg action=remove --tool-arg "sessionId=$sid"
expect "kill_process remove deletes the job" '"removed": ?true'
process --tool-arg action=poll --tool-arg "sessionId=$sid"
expect "a removed job is not found" "Session $sid not found"

process --tool-arg action=explode --tool-arg sessionId=x
expect "an unknown action is a tool error" '"isError": ?true'
process --tool-arg action=log --tool-arg sessionId=x --tool-arg offset=-1
expect "a negative offset is a tool error" 'offset must not be negative'

if [ "$fail" -ne 0 ]; then
	echo "mcp-inspector-check: FAILED"
	exit 1
fi
echo "mcp-inspector-check: all checks passed"
