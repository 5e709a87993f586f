// Replays a original's example calls against `jobs mcp --profile NAME` through
// the official TypeScript SDK client, and prints one JSON line per check:
// { profile, check, ok, error }. A last line { profile, done: true, ids }
// names the jobs it started, for the caller to find in the CLI.
//
//   node profiles.mjs /path/to/jobs PROFILE
//
// The environment is passed on to `jobs mcp` (JOBS_DB, XDG_*, JOBS_SCOPE).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, profile] = process.argv.slice(2);
if (!bin || !profile) {
  console.error("usage: node profiles.mjs /path/to/jobs PROFILE");
  process.exit(2);
}

async function connect(name, env = {}) {
  const client = new Client({ name: "jobs-profiles", version: "1.0.0" });
  const args = ["mcp"];
  if (name) args.push("--profile", name);
  await client.connect(new StdioClientTransport({ command: bin, args, env: { ...process.env, ...env }, stderr: "inherit" }));
  return client;
}

// call returns the structured result (or the parsed text), and isError.
async function call(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  let sc = res.structuredContent;
  if (!sc) {
    try { sc = JSON.parse(text); } catch { sc = {}; }
  }
  return { sc, text, isError: !!res.isError };
}

let failed = 0;
function check(name, cond, detail) {
  const line = { profile, check: name, ok: !!cond };
  if (!cond) {
    failed++;
    line.error = typeof detail === "string" ? detail : JSON.stringify(detail);
  }
  console.log(JSON.stringify(line));
}

const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const ids = [];

async function claudeCode() {
  const c = await connect("claude-code");
  const { tools } = await c.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check("tools", ["run_command", "bash_output", "kill_shell", "list_shells"].every((n) => byName[n]), Object.keys(byName));
  check("bash_output schema", eq(byName.bash_output?.inputSchema?.required, ["bash_id"]) && byName.bash_output?.inputSchema?.properties?.filter, byName.bash_output?.inputSchema);
  check("kill_shell schema", eq(byName.kill_shell?.inputSchema?.required, ["shell_id"]), byName.kill_shell?.inputSchema);

  // run_command with run_in_background: true, a dev server that keeps running.
  let r = await call(c, "run_command", { command: "echo one; echo; echo two; sleep 30", run_in_background: true });
  const dev = r.sc.id;
  ids.push(dev);
  check("run_in_background running", r.sc.status === "running" && dev, r.sc);
  check("running message", r.sc.message?.startsWith("✓ Background process running") &&
    r.sc.message.includes(` ID: ${dev}`) && r.sc.message.includes(`Use bash_output("${dev}") to check output, kill_shell("${dev}") to stop.`), r.sc.message);

  // bash_output: only the new output, blank lines dropped; then nothing new.
  r = await call(c, "bash_output", { bash_id: dev });
  check("bash_output new output", r.sc.id === dev && r.sc.status === "running" && r.sc.newOutput === "one\ntwo" && r.sc.newErrors === "", r.sc);
  r = await call(c, "bash_output", { bash_id: dev });
  check("bash_output only new", r.sc.newOutput === "" && r.sc.status === "running", r.sc);

  // A quick command: completed, and filter is a case-insensitive regex.
  r = await call(c, "run_command", { command: "echo a1; echo b2; echo A3", run_in_background: true });
  const quick = r.sc.id;
  ids.push(quick);
  // The document reports a process that did not fail within its validation
  // wait as running; the exit code is an addition.
  check("quick completed", r.sc.status === "running" && r.sc.exitCode === 0 && r.sc.message?.startsWith("✓ Background process running"), r.sc);
  r = await call(c, "bash_output", { bash_id: quick, filter: "^a" });
  check("filter", r.sc.status === "completed" && r.sc.newOutput === "a1\nA3" && r.sc.exitCode === 0, r.sc);
  r = await call(c, "bash_output", { bash_id: quick.slice(0, 6), filter: "([" });
  check("partial id, invalid regex unfiltered", r.sc.id === quick && r.sc.newOutput === "", r.sc);

  // A command that fails at once: the original's failure message.
  r = await call(c, "run_command", { command: "echo boom >&2; exit 3", run_in_background: true });
  ids.push(r.sc.id);
  const boom = r.sc.id;
  check("failed immediately", r.sc.status === "failed" && r.sc.exitCode === 3 &&
    r.sc.message === "✕ Process failed immediately\n Command: echo boom >&2; exit 3\n Error: boom\n Exit code: 3", r.sc);

  // stdout and stderr apart, as the original interface keeps them.
  r = await call(c, "bash_output", { bash_id: boom });
  check("newErrors", r.sc.status === "failed" && r.sc.newOutput === "" && r.sc.newErrors === "boom" && r.sc.exitCode === 3, r.sc);

  // The original's timeout (milliseconds) kills, and says so.
  r = await call(c, "run_command", { command: "sleep 30", run_in_background: true, timeout: 300 });
  const slow = r.sc.id;
  ids.push(slow);
  check("timeout killed", r.sc.status === "running" && r.sc.message?.includes("Process killed after 300ms timeout"), r.sc);
  r = await call(c, "bash_output", { bash_id: slow });
  check("timeout words", r.sc.status === "killed" && r.sc.newErrors === "Process killed after 300ms timeout", r.sc);

  // list_shells: every process, with the original's fields.
  r = await call(c, "list_shells", {});
  const shells = r.sc.shells || [];
  const d = shells.find((s) => s.id === dev);
  check("list_shells", shells.length === 4 && d && d.status === "running" && d.pid > 0 && /^\d+s$/.test(d.runtime) &&
    !isNaN(Date.parse(d.startedAt)) && d.command === "echo one; echo; echo two; sleep 30" && "outputLines" in d && "errorLines" in d, shells);
  check("list_shells text is the array", Array.isArray(JSON.parse(r.text)), r.text.slice(0, 200));

  // kill_shell, then again, then an unknown id.
  r = await call(c, "kill_shell", { shell_id: dev });
  check("kill_shell", eq(r.sc, { success: true, message: `Process ${dev} killed` }), r.sc);
  r = await call(c, "kill_shell", { shell_id: dev });
  check("kill_shell twice", eq(r.sc, { success: false, message: "Process already killed" }), r.sc);
  r = await call(c, "kill_shell", { shell_id: "nosuch" });
  check("kill_shell unknown", eq(r.sc, { success: false, message: "Process not found: nosuch" }), r.sc);
  r = await call(c, "bash_output", { bash_id: "nosuch" });
  check("bash_output unknown", r.isError && r.sc.error === "Process not found: nosuch. Use list_shells to see available processes.", r);

  // A foreground run_command returns the result.
  r = await call(c, "run_command", { command: "echo fg" });
  ids.push(r.sc.id);
  check("foreground", r.sc.status === "completed" && r.sc.exitCode === 0 && r.sc.output === "fg\n", r.sc);
  await c.close();

  // The jobs are the scope's, whatever the profile.
  const o = await connect("");
  r = await call(o, "process", { action: "status", sessionId: quick });
  check("seen under openclaw", !r.isError && r.text.includes(quick), r.text.slice(0, 300));
  await o.close();
}

// openclaw replays OpenClaw: the tool schemas, execute_command with
// background and yieldMs, process poll/log/write/list/kill/clear/remove,
// the status words (running, done, error, killed), the result fields
// (sessionId, exitCode, output as a string, SessionMeta), log's character
// slicing, the defaults and their PI_BASH_*/OPENCLAW_* variables, and the
// three error wordings.
async function openclaw() {
  const c = await connect("openclaw");
  const { tools } = await c.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check("tools", byName.execute_command && byName.process, Object.keys(byName));
  const pprops = byName.process?.inputSchema?.properties || {};
  const actions = pprops.action?.enum || [];
  check("process actions", ["list", "poll", "log", "write", "kill", "clear", "remove"].every((a) => actions.includes(a)), actions);
  check("process params", ["action", "sessionId", "offset", "limit", "data", "eof"].every((p) => p in pprops), Object.keys(pprops));
  const eprops = byName.execute_command?.inputSchema?.properties || {};
  check("execute_command params", ["command", "timeout", "description", "background", "yieldMs"].every((p) => p in eprops), Object.keys(eprops));

  // Start Background Session: {status: "running", sessionId}.
  let r = await call(c, "execute_command", { command: "cat", background: true, description: "echo stdin" });
  const cat = r.sc.sessionId;
  ids.push(cat);
  check("background running", r.sc.status === "running" && typeof cat === "string" && cat.length > 0, r.sc);

  // Write Input: data to stdin, eof closes it; poll: {status, output, exitCode}.
  r = await call(c, "process", { action: "write", sessionId: cat, data: "hello\n", eof: true });
  check("write eof", !r.isError, r.text);
  r = await call(c, "process", { action: "wait", sessionId: cat, timeout: 5 });
  check("ends after eof", r.sc.status === "done" && r.sc.output === "hello\n" && r.sc.exitCode === 0, r.sc);
  r = await call(c, "process", { action: "poll", sessionId: cat });
  check("poll done", r.sc.status === "done" && r.sc.exitCode === 0 && typeof r.sc.output === "string" && !("exit_code" in r.sc), r.sc);

  // A quick command inside the yield window returns its result: output is a string.
  r = await call(c, "execute_command", { command: "for i in 1 2 3 4 5; do echo line$i; done", yieldMs: 5000, description: "five lines" });
  const five = r.sc.sessionId; // removed below, so not in ids
  check("yield result", r.sc.status === "done" && r.sc.exitCode === 0 && r.sc.output === "line1\nline2\nline3\nline4\nline5\n", r.sc);
  // The default window (10000 ms) waits for a command of a second.
  r = await call(c, "execute_command", { command: "sleep 1; echo late", description: "one second" });
  ids.push(r.sc.sessionId);
  check("default yield 10000", r.sc.status === "done" && r.sc.output === "late\n", r.sc);
  // A command longer than yieldMs keeps running and returns its sessionId.
  const t0 = Date.now();
  r = await call(c, "execute_command", { command: "sleep 30", yieldMs: 300, description: "long sleep" });
  const slept = Date.now() - t0;
  const sl = r.sc.sessionId;
  ids.push(sl);
  check("yieldMs window", r.sc.status === "running" && sl && slept >= 250 && slept < 5000, { sc: r.sc, slept });

  // A non-zero exit is "error", with exitCode.
  r = await call(c, "execute_command", { command: "echo bad >&2; exit 3", description: "fails on purpose" });
  const bad = r.sc.sessionId;
  ids.push(bad);
  check("error status", r.sc.status === "error" && r.sc.exitCode === 3 && r.sc.output === "bad\n" && !("exit_code" in r.sc), r.sc);
  r = await call(c, "process", { action: "poll", sessionId: bad });
  check("poll error", r.sc.status === "error" && r.sc.exitCode === 3, r.sc);

  // Read Full Output: log's offset and limit slice characters.
  r = await call(c, "execute_command", { command: "printf 'h\\303\\251llo w\\303\\266rld\\nsecond line'", description: "two lines" });
  const chars = r.sc.sessionId;
  ids.push(chars);
  const full = "héllo wörld\nsecond line";
  r = await call(c, "process", { action: "log", sessionId: chars, offset: 1, limit: 4 });
  check("log slices characters", r.sc.output === full.slice(1, 5) && r.sc.output === "éllo", r.sc);
  r = await call(c, "process", { action: "log", sessionId: chars, offset: 6, limit: 10 });
  check("log across a line", r.sc.output === full.slice(6, 16) && r.sc.output_info?.next_offset === 16, r.sc);
  r = await call(c, "process", { action: "log", sessionId: chars, offset: 16 });
  check("log to the end", r.sc.output === full.slice(16) && r.sc.output_info?.next_offset === undefined, r.sc);

  // Poll output is the last 500 characters by default.
  r = await call(c, "execute_command", { command: "i=0; while [ $i -lt 100 ]; do i=$((i+1)); echo \"row $i of the long output\"; done", description: "long output" });
  const long = r.sc.sessionId;
  ids.push(long);
  r = await call(c, "process", { action: "poll", sessionId: long });
  const p500 = r.sc.output || "";
  check("poll 500 characters", p500.length > 0 && p500.length <= 500 && p500.endsWith("row 100 of the long output\n"), { length: p500.length, output: p500.slice(-60) });

  // Manage: list is the original's SessionMeta.
  r = await call(c, "process", { action: "list" });
  const metas = r.sc.sessions || [];
  const m = metas.find((x) => x.sessionId === bad);
  check("list SessionMeta", m && m.status === "error" && m.exitCode === 3 && typeof m.command === "string" &&
    typeof m.createdAt === "number" && typeof m.lastAccessedAt === "number" && m.lastAccessedAt >= m.createdAt &&
    m.outputLength === 4 && m.offloaded === false && metas.some((x) => x.sessionId === sl && x.status === "running" && x.pid > 0), metas);

  // Kill, clear and remove are process's, as both documents have them
  // (kill_process serves the same three alone).
  // Kill: SIGTERM, then killed; killing a dead session is a no-op.
  r = await call(c, "process", { action: "kill", sessionId: sl });
  check("kill", !r.isError && r.sc.status === "killed", r.sc);
  r = await call(c, "process", { action: "poll", sessionId: sl });
  check("killed status", r.sc.status === "killed", r.sc);
  r = await call(c, "process", { action: "kill", sessionId: five });
  check("kill idempotent", !r.isError, r.text);
  r = await call(c, "kill_process", { action: "kill", sessionId: five });
  check("kill_process kill idempotent", !r.isError, r.text);
  // Clear drops the output; remove deletes the session.
  r = await call(c, "process", { action: "clear", sessionId: five });
  check("clear", !r.isError, r.text);
  r = await call(c, "process", { action: "log", sessionId: five, offset: 0 });
  check("cleared log", r.sc.output === "", r.sc);
  r = await call(c, "process", { action: "remove", sessionId: five });
  check("remove", !r.isError, r.text);

  // The three error wordings.
  r = await call(c, "process", { action: "poll", sessionId: five });
  check("not found", r.isError && r.text.includes(`Session ${five} not found`), r.text);
  r = await call(c, "process", { action: "write", sessionId: bad, data: "x" });
  check("not running", r.isError && r.text.includes(`Session ${bad} is not running`), r.text);
  r = await call(c, "execute_command", { command: "sleep 30", background: true, description: "no stdin" });
  const ns = r.sc.sessionId;
  ids.push(ns);
  await call(c, "process", { action: "write", sessionId: ns, data: "", eof: true });
  r = await call(c, "process", { action: "write", sessionId: ns, data: "x" });
  check("stdin not available", r.isError && r.text.includes(`Session ${ns} stdin is not available`), r.text);
  await call(c, "kill_process", { sessionId: ns });
  await c.close();

  // The original interfaces' variables: PI_BASH_YIELD_MS sets the window,
  // PI_BASH_MAX_OUTPUT_CHARS (or OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS) poll's characters.
  for (const [name, value] of [["PI_BASH_MAX_OUTPUT_CHARS", "100"], ["OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", "120"]]) {
    const e = await connect("openclaw", { [name]: value, PI_BASH_YIELD_MS: "200" });
    const t1 = Date.now();
    r = await call(e, "execute_command", { command: "sleep 30", description: "window from env" });
    const took = Date.now() - t1;
    ids.push(r.sc.sessionId);
    check(`PI_BASH_YIELD_MS with ${name}`, r.sc.status === "running" && took < 5000, { sc: r.sc, took });
    await call(e, "kill_process", { sessionId: r.sc.sessionId });
    // One write of 100 rows, which a poll that blocks for new output reads whole.
    r = await call(e, "execute_command", { command: "sleep 0.3; awk 'BEGIN { for (i = 1; i <= 100; i++) s = s sprintf(\"row %d of the long output\\n\", i); printf \"%s\", s }'", background: true, description: "long output" });
    const again = r.sc.sessionId;
    ids.push(again);
    r = await call(e, "process", { action: "poll", sessionId: again, timeout: 10 });
    check(name, r.sc.output.length > 0 && r.sc.output.length <= Number(value) && r.sc.output.endsWith("row 100 of the long output\n"), r.sc.output);
    await e.close();
  }
}

// duragent replays Duragent: spawn_process with wait false and true,
// process list/status/log/write/kill/capture/send_keys by handle.
async function duragent() {
  const c = await connect("duragent");
  const { tools } = await c.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check("tools", byName.spawn_process && byName.process, Object.keys(byName));
  const props = byName.spawn_process?.inputSchema?.properties || {};
  check("spawn_process params", ["command", "workdir", "wait", "tmux", "label", "timeout_seconds"].every((p) => p in props), Object.keys(props));

  // Scenario 2: fire and forget.
  let r = await call(c, "spawn_process", { command: "echo started; sleep 30", workdir: "/tmp", wait: false, label: "build-feature-x" });
  const h = r.sc.handle;
  ids.push(h);
  check("wait false", h && r.sc.status === "running" && r.sc.pid > 0, r.sc);

  // Scenario 1: synchronous.
  r = await call(c, "spawn_process", { command: "echo out; echo err >&2; pwd", workdir: "/tmp", wait: true });
  ids.push(r.sc.handle);
  check("wait true", r.sc.status === "completed" && r.sc.exit_code === 0 && ["out", "err", "/tmp"].every((l) => r.sc.output.split("\n").includes(l)) && typeof r.sc.duration_seconds === "number", r.sc);
  r = await call(c, "spawn_process", { command: "exit 4", wait: true });
  ids.push(r.sc.handle);
  check("wait true failed", r.sc.status === "failed" && r.sc.exit_code === 4, r.sc);
  r = await call(c, "spawn_process", { command: "sleep 30", wait: true, timeout_seconds: 0.5 });
  ids.push(r.sc.handle);
  check("timed_out", r.sc.status === "timed_out", r.sc);

  // process actions by handle.
  r = await call(c, "process", { action: "list" });
  check("list", (r.sc.processes || []).some((p) => p.handle === h && p.label === "build-feature-x" && p.status === "running"), r.sc);
  r = await call(c, "process", { action: "status", handle: h });
  check("status", r.sc.handle === h && r.sc.status === "running", r.sc);
  r = await call(c, "process", { action: "log", handle: h, offset: 0, limit: 1 });
  check("log offset/limit", r.sc.output === "started\n" && r.sc.next_offset === 1, r.sc);
  r = await call(c, "process", { action: "write", handle: h, data: "x\n" });
  check("write", !r.isError && r.sc.written === 2, r.text);
  r = await call(c, "process", { action: "capture", handle: h });
  check("capture needs tmux", r.isError, r.text);
  r = await call(c, "process", { action: "kill", handle: h });
  check("kill", r.sc.handle === h && r.sc.status === "failed" && r.sc.killed === true, r.sc);
  r = await call(c, "process", { action: "status", handle: "proc-nosuch" });
  check("not found", r.isError && r.text.includes("Process proc-nosuch not found"), r.text);

  // tmux: capture the screen, send keys as a string (then Enter).
  if (process.env.SKIP_TMUX !== "1") {
    r = await call(c, "spawn_process", { command: "read line; echo got:$line; sleep 30", tmux: true, wait: false });
    const t = r.sc.handle;
    ids.push(t);
    check("tmux session", r.sc.tmux_session && r.sc.status === "running", r.sc);
    r = await call(c, "process", { action: "send_keys", handle: t, keys: "hello" });
    check("send_keys string", !r.isError, r.text);
    let screen = "";
    for (let i = 0; i < 50 && !screen.includes("got:hello"); i++) {
      r = await call(c, "process", { action: "capture", handle: t });
      screen = r.sc.content || "";
      if (!screen.includes("got:hello")) await new Promise((res) => setTimeout(res, 100));
    }
    check("capture", screen.includes("got:hello"), screen);
    await call(c, "process", { action: "kill", handle: t });
  }
  await c.close();
}

// macosShell replays the macOS Shell MCP's example usage: run_background with args
// and session, list_processes, get_process_output, kill_process, and
// stream_process_output.
async function macosShell() {
  const c = await connect("macos-shell");
  const { tools } = await c.listTools();
  const names = tools.map((t) => t.name);
  check("tools", ["run_background", "list_processes", "get_process_output", "kill_process", "stream_process_output"].every((n) => names.includes(n)), names);

  let r = await call(c, "run_background", { command: "echo", args: ["build", "\"it's watching\""], session: "dev", bufferSize: 300 });
  const quick = r.sc.processId;
  ids.push(quick);
  check("run_background", quick && r.sc.pid > 0 && ["starting", "running", "stopped"].includes(r.sc.status) && r.sc.bufferSize === 300, r.sc);
  r = await call(c, "run_background", { command: "sh", args: ["-c", "'echo out1; echo err1 >&2; echo out2; sleep 30'"], session: "dev" });
  const dev = r.sc.processId;
  ids.push(dev);
  r = await call(c, "run_background", { command: "exit 2" });
  const bad = r.sc.processId;
  ids.push(bad);

  // stream_process_output waits for the lines.
  r = await call(c, "stream_process_output", { processId: dev, afterLine: 0, timeout: 5 });
  let lines = r.sc.output || [];
  for (let i = 0; i < 20 && lines.length < 3; i++) {
    r = await call(c, "stream_process_output", { processId: dev, afterLine: r.sc.nextLine || 0, timeout: 5 });
    lines = lines.concat(r.sc.output || []);
  }
  // stdout and stderr are separate pipes: their order relative to each
  // other is the order they were read in.
  const sorted = (ls) => ls.map((l) => l.type + ":" + l.content).sort().join(",");
  check("stream_process_output", sorted(lines) === "stderr:err1,stdout:out1,stdout:out2" && lines.every((l, i) => l.lineNumber === i + 1), lines);

  r = await call(c, "get_process_output", { processId: dev, lines: 50 });
  const out = r.sc.output || [];
  check("get_process_output lines", r.sc.processId === dev && r.sc.status === "running" && r.sc.totalLines === 3 && r.sc.requestedLines === 50 &&
    sorted(out) === "stderr:err1,stdout:out1,stdout:out2" && out[2].lineNumber === 3 && !isNaN(Date.parse(out[0].timestamp)), out);
  r = await call(c, "get_process_output", { processId: dev, fromLine: 2, lines: 1 });
  check("fromLine", (r.sc.output || []).length === 1 && r.sc.output[0].content === out[1].content && r.sc.output[0].lineNumber === 2, r.sc);
  r = await call(c, "get_process_output", { processId: dev, type: "stderr" });
  check("type stderr", (r.sc.output || []).map((l) => l.content).join() === "err1", r.sc);

  // Statuses: a process that exited 0 is stopped, non-zero failed.
  r = await call(c, "get_process_output", { processId: quick });
  check("stopped", r.sc.status === "stopped" && r.sc.output?.[0]?.content === "build it's watching", r.sc);
  r = await call(c, "list_processes", { session: "dev" });
  const procs = r.sc.processes || [];
  check("list_processes session", procs.length === 2 && procs.every((p) => p.sessionName === "dev" && typeof p.runtime === "number" && "outputLines" in p && "startTime" in p), procs);
  r = await call(c, "list_processes", { status: "failed", includeOutput: true });
  check("list_processes status", (r.sc.processes || []).length === 1 && r.sc.processes[0].id === bad && Array.isArray(r.sc.processes[0].recentOutput), r.sc);

  r = await call(c, "kill_process", { processId: dev });
  check("kill_process", r.sc.processId === dev && r.sc.previousStatus === "running" && r.sc.newStatus === "killed" && r.sc.killed === true, r.sc);
  r = await call(c, "kill_process", { processId: dev, force: true });
  check("kill_process again", r.sc.previousStatus === "killed" && r.sc.killed === false, r.sc);
  r = await call(c, "get_process_output", { processId: "nosuch" });
  check("not found", r.isError && r.text.includes("Process 'nosuch' not found"), r.text);
  await c.close();
}

const run = { "claude-code": claudeCode, openclaw, duragent, "macos-shell": macosShell }[profile];
if (!run) {
  console.error(`profiles.mjs: no replay for profile ${profile}`);
  process.exit(2);
}
try {
  await run();
} catch (e) {
  check("replay", false, String(e && e.stack || e));
}
console.log(JSON.stringify({ profile, done: true, ids }));
process.exit(failed ? 1 : 0);
