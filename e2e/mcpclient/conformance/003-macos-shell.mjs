// Conformance of `jobs mcp --profile macos-shell` to seed document 003,
// "Background Process Management Design Document" (the macOS Shell MCP
// Server). Written from the document, not from the profile's code: each
// check is one concrete requirement, in the document's words, called as an
// agent written against the document calls it (camelCase parameters, JSON
// results). Additions of jobs (resources, sessions' tools, warnings) are
// checked where the document asks for what they provide.
//
//   node conformance/003-macos-shell.mjs /path/to/jobs
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { bin, call as sdkCall, check, connect, done, suite, until } from "./lib.mjs";

// call is the SDK call; a tool the server does not have (a protocol error)
// reads as a failed call, so that every check is reported.
const call = async (...args) => {
  try {
    return await sdkCall(...args);
  } catch (e) {
    return { sc: {}, text: String(e?.message || e), isError: true };
  }
};

suite("003-macos-shell");

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "conf003-"));
// A zsh of our own on PATH: the document spawns with shell '/bin/zsh'; a
// server that finds zsh installed must run commands with it.
const zdir = path.join(tmp, "zsh-bin");
fs.mkdirSync(zdir);
fs.writeFileSync(path.join(zdir, "zsh"), "#!/bin/sh\nRAN_BY=zsh; export RAN_BY\nexec /bin/sh \"$@\"\n", { mode: 0o755 });

let c = await connect("macos-shell");
const started = [];
const run = async (args) => {
  const r = await call(c, "run_background", args);
  if (r.sc.processId) started.push(r.sc.processId);
  return r;
};
const out = (id, args = {}) => call(c, "get_process_output", { processId: id, ...args });
const list = async (args = {}) => (await call(c, "list_processes", args)).sc.processes || [];
const find = async (id, args = {}) => (await list(args)).find((p) => p.id === id);
const ended = (id) => until(async () => {
  const p = await find(id);
  return p && !["starting", "running"].includes(p.status) ? p : null;
});
const jobsJSON = (...args) => JSON.parse(execFileSync(bin, ["--json", ...args], { env: process.env, encoding: "utf8" }));

// ---- New Tools: run_background ----------------------------------------
const t0 = Date.now();
let r = await run({ command: "sleep", args: ["300"], session: "dev" });
const sleeper = r.sc.processId;
check("003-R1", "run_background: Starts a command in the background and returns immediately",
  r.sc.processId && Date.now() - t0 < 20000 && !r.isError, r.sc);
check("003-R2", "run_background returns processId: string, pid: number, status: string (Initial status \"starting\" or \"running\")",
  typeof r.sc.processId === "string" && typeof r.sc.pid === "number" && r.sc.pid > 0 && ["starting", "running"].includes(r.sc.status), r.sc);
let p = await find(sleeper);
check("003-R3", "Start processes in background - Run commands that continue after the initial call returns",
  p && p.status === "running", p);
check("003-R4", "Session integration - Background processes are tied to sessions (session: \"dev\" → sessionName \"dev\")",
  p && p.sessionName === "dev", p);

r = await run({ command: "pwd" });
let quick = r.sc.processId;
p = await ended(quick);
check("003-R5", "session?: string // Session name/ID (default: \"default\")", p && p.sessionName === "default", p);

r = await run({ command: "pwd", cwd: tmp });
await ended(r.sc.processId);
let o = await out(r.sc.processId);
check("003-R6", "cwd?: string // Working directory override", (o.sc.output || []).map((l) => l.content).join() === fs.realpathSync(tmp) || (o.sc.output || []).map((l) => l.content).join() === tmp, o.sc);

r = await run({ command: "echo", args: ["$GREETING"], env: { GREETING: "hello-env" } });
await ended(r.sc.processId);
o = await out(r.sc.processId);
check("003-R7", "env?: Record<string, string> // Environment variables", (o.sc.output || [])[0]?.content === "hello-env", o.sc);

// spawn(command, args, { shell }): the shell reads command and args as one line.
r = await run({ command: "echo", args: ["run", "build:watch"], session: "dev" });
const example = r.sc.processId;
await ended(example);
p = await find(example);
o = await out(example);
check("003-R8", "command: string // Command to execute; args?: string[] // Command arguments (list shows command \"npm\", args [\"run\", \"build:watch\"] as given)",
  p && p.command === "echo" && JSON.stringify(p.args) === JSON.stringify(["run", "build:watch"]) && o.sc.output?.[0]?.content === "run build:watch", { p, o: o.sc });

// ---- Interfaces: BackgroundProcess, ProcessStatus ----------------------
p = await find(example);
check("003-R9", "BackgroundProcess: id, pid, status, startTime, exitCode (if process has ended), endTime (when process ended)",
  p && typeof p.id === "string" && typeof p.pid === "number" && p.exitCode === 0 && !isNaN(Date.parse(p.startTime)) && !isNaN(Date.parse(p.endTime)), p);
r = await run({ command: "exit 3" });
const bad = r.sc.processId;
const pbad = await ended(bad);
check("003-R10", "proc.on('exit'): process.status = code === 0 ? ProcessStatus.STOPPED : ProcessStatus.FAILED; process.exitCode = code",
  p.status === "stopped" && pbad && pbad.status === "failed" && pbad.exitCode === 3, { p, pbad });

// ---- list_processes -----------------------------------------------------
let procs = await list();
const fields = ["id", "sessionName", "command", "args", "pid", "status", "startTime", "runtime", "outputLines"];
check("003-R11", "list_processes returns processes: Array<{ id, sessionName, command, args, pid, status, startTime, runtime, outputLines }>",
  procs.length >= 5 && procs.every((q) => fields.every((f) => f in q) && typeof q.runtime === "number" && typeof q.outputLines === "number" && typeof q.startTime === "string" && Array.isArray(q.args)), procs.slice(0, 2));
check("003-R12", "runtime: number // milliseconds",
  (await until(async () => { const q = await find(sleeper); return q && q.runtime >= 1000 && q.runtime < 600000 ? q : null; })) != null, await find(sleeper));
procs = await list({ session: "dev" });
check("003-R13", "list_processes: optionally filtered by session", procs.length >= 2 && procs.every((q) => q.sessionName === "dev"), procs.map((q) => q.sessionName));
procs = await list({ status: "failed" });
check("003-R14", "list_processes: optionally filtered by status (status?: ProcessStatus)", procs.length >= 1 && procs.every((q) => q.status === "failed") && procs.some((q) => q.id === bad), procs.map((q) => q.status));
r = await run({ command: "seq", args: ["1", "25"] });
const seq25 = r.sc.processId;
await ended(seq25);
procs = await list({ includeOutput: true });
let q = procs.find((x) => x.id === seq25);
check("003-R15", "includeOutput?: boolean // Include recent output; recentOutput?: string[] // last 10 lines if requested",
  q && JSON.stringify(q.recentOutput) === JSON.stringify(["16", "17", "18", "19", "20", "21", "22", "23", "24", "25"]), q);
q = await find(seq25);
check("003-R16", "includeOutput (default: false): no recentOutput unless requested", q && q.recentOutput === undefined, q);
check("003-R17", "outputLines: number // total lines captured", q && q.outputLines === 25, q);

// ---- get_process_output and OutputLine ------------------------------------
o = await out(seq25);
check("003-R18", "get_process_output returns processId, status, totalLines, requestedLines, output: Array<{ timestamp, type, content, lineNumber }>",
  o.sc.processId === seq25 && o.sc.status === "stopped" && o.sc.totalLines === 25 && typeof o.sc.requestedLines === "number" &&
  o.sc.output.length === 25 && o.sc.output.every((l) => !isNaN(Date.parse(l.timestamp)) && l.type === "stdout" && typeof l.content === "string" && typeof l.lineNumber === "number"), o.sc);
r = await run({ command: "seq", args: ["1", "150"] });
const seq150 = r.sc.processId;
await ended(seq150);
o = await out(seq150);
check("003-R19", "lines?: number // Number of lines to retrieve (default: 100)",
  o.sc.requestedLines === 100 && o.sc.output.length === 100 && o.sc.output[0].content === "51" && o.sc.output[99].content === "150", { n: o.sc.output?.length, first: o.sc.output?.[0] });
o = await out(seq150, { lines: 5, fromLine: 20 });
check("003-R20", "fromLine?: number // Start from specific line number",
  o.sc.output.map((l) => l.content).join() === "20,21,22,23,24" && o.sc.output.map((l) => l.lineNumber).join() === "20,21,22,23,24", o.sc.output);
check("003-R21", "OutputLine.lineNumber: lineNumber: ++lineCount (lines numbered as they arrive, from 1)",
  (await out(seq25)).sc.output.every((l, i) => l.lineNumber === i + 1 && l.content === String(i + 1)), null);

// Five lines on alternating streams, each a moment after the other.
r = await run({ command: "echo o1; sleep 0.4; echo e2 >&2; sleep 0.4; echo o3; sleep 0.4; echo e4 >&2; sleep 0.4; echo o5" });
const mixed = r.sc.processId;
await ended(mixed);
const allLines = (await out(mixed)).sc.output;
const outs = (await out(mixed, { type: "stdout" })).sc.output;
const errs = (await out(mixed, { type: "stderr" })).sc.output;
check("003-R22", "type?: 'all' | 'stdout' | 'stderr' // Filter by output type",
  allLines.map((l) => l.type + ":" + l.content).join() === "stdout:o1,stderr:e2,stdout:o3,stderr:e4,stdout:o5" &&
  outs.map((l) => l.content).join() === "o1,o3,o5" && errs.map((l) => l.content).join() === "e2,e4", { allLines, outs, errs });
check("003-R23", "lineNumber: ++lineCount over both streams: a filtered line keeps its number (stdout 1,3,5; stderr 2,4)",
  outs.map((l) => l.lineNumber).join() === "1,3,5" && errs.map((l) => l.lineNumber).join() === "2,4", { outs, errs });
const at = Object.fromEntries(allLines.map((l) => [l.lineNumber, l.timestamp]));
check("003-R24", "OutputLine.timestamp: timestamp: new Date() as each line arrives (a filtered line keeps its own)",
  [...outs, ...errs].every((l) => l.timestamp === at[l.lineNumber]) && Date.parse(at[5]) - Date.parse(at[1]) >= 1000, { at, outs, errs });
o = await out(mixed, { type: "stderr", fromLine: 3 });
check("003-R25", "fromLine with type: line numbers are the output's (stderr from line 3 is e4, line 4)",
  o.sc.output.length === 1 && o.sc.output[0].content === "e4" && o.sc.output[0].lineNumber === 4, o.sc.output);

// ---- CircularBuffer --------------------------------------------------------
r = await run({ command: "seq", args: ["1", "350"] });
const seq350 = r.sc.processId;
await ended(seq350);
o = await out(seq350, { lines: 1000 });
check("003-R26", "CircularBuffer(maxLines = 300) // AI-optimized; Circular buffer drops oldest lines when full",
  o.sc.totalLines === 350 && o.sc.output.length === 300 && o.sc.output[0].content === "51" && o.sc.output[0].lineNumber === 51 && o.sc.output[299].content === "350", { total: o.sc.totalLines, n: o.sc.output?.length, first: o.sc.output?.[0] });
r = await run({ command: "seq", args: ["1", "30"], bufferSize: 10 });
const small = r.sc.processId;
await ended(small);
o = await out(small, { lines: 100 });
check("003-R27", "bufferSize?: number // Max output lines to buffer (default: 300); Configurable per process",
  o.sc.output.map((l) => l.content).join() === "21,22,23,24,25,26,27,28,29,30" && o.sc.totalLines === 30, o.sc.output);
r = await call(c, "clear_process_output", { processId: seq150 });
o = await out(seq150);
q = await find(seq150);
check("003-R28", "CircularBuffer.clear(); Memory Management: Option to clear old output",
  !r.isError && o.sc.output.length === 0 && q.bufferBytes === 0, { r: r.sc, o: o.sc });

// ---- Process monitoring and resources ---------------------------------------
r = await run({ command: "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 300" });
const busy = r.sc.processId;
q = await until(async () => { const x = await find(busy); return x?.resources?.cpuTime > 0 ? x : null; });
check("003-R29", "Monitor processes - Track status, runtime, and resource usage (CPU and memory per running process)",
  q && typeof q.resources.cpu === "number" && q.resources.cpu > 0 && typeof q.resources.memory === "number" && q.resources.memory > 0 && q.resources.source === "live", q?.resources);
q = await find(seq350);
check("003-R30", "Metrics and Monitoring: CPU/memory usage tracking (a finished process keeps what it used)",
  q && q.resources && typeof q.resources.cpuTime === "number" && q.resources.source === "exit", q?.resources);
r = await call(c, "list_processes", {});
check("003-R31", "Memory Management: Monitor total buffer memory usage; Warn when approaching limits (warnings)",
  typeof r.sc.totalBufferBytes === "number" && r.sc.totalBufferBytes > 0 && Array.isArray(r.sc.warnings) && r.sc.processes.every((x) => typeof x.bufferBytes === "number"), { total: r.sc.totalBufferBytes, warnings: r.sc.warnings });

// ---- Implementation details: spawn ---------------------------------------
r = await run({ command: "cat; echo after-cat" });
const cat = r.sc.processId;
q = await ended(cat);
o = await out(cat);
check("003-R32", "spawn(..., { stdio: ['ignore', 'pipe', 'pipe'] }): stdin is ignored, a reader of stdin ends",
  q && q.status === "stopped" && o.sc.output.map((l) => l.content).join() === "after-cat", { q, o: o.sc });
r = await run({ command: "ps -o pgid= -p $$" });
await ended(r.sc.processId);
o = await out(r.sc.processId);
check("003-R33", "spawn(..., { detached: true }): the process leads its own process group",
  Number(o.sc.output?.[0]?.content?.trim()) === r.sc.pid, { pid: r.sc.pid, o: o.sc.output });
r = await run({ command: "echo out; echo err >&2" });
await ended(r.sc.processId);
o = await out(r.sc.processId);
check("003-R34", "Capture output - Buffer stdout/stderr for later retrieval",
  o.sc.output.map((l) => l.type + ":" + l.content).sort().join() === "stderr:err,stdout:out", o.sc.output);
r = await run({ command: "id -u" });
await ended(r.sc.processId);
o = await out(r.sc.processId);
check("003-R35", "Process Isolation: Processes run with user permissions; No elevation of privileges",
  o.sc.output?.[0]?.content === String(process.getuid()), o.sc.output);

// shell: '/bin/zsh' — a server that finds zsh runs commands with it.
const z = await connect("macos-shell", { PATH: zdir + ":" + process.env.PATH });
r = await call(z, "run_background", { command: "echo ran-by-$RAN_BY" });
started.push(r.sc.processId);
await until(async () => { const x = (await call(z, "list_processes", {})).sc.processes.find((y) => y.id === r.sc.processId); return x && x.status !== "running" && x.status !== "starting"; });
o = await call(z, "get_process_output", { processId: r.sc.processId });
check("003-R36", "spawn(command, args, { shell: '/bin/zsh' }): commands run by zsh when it is installed",
  o.sc.output?.[0]?.content === "ran-by-zsh" && String(r.sc.shell || "").endsWith("/zsh"), { start: r.sc, o: o.sc.output });
await z.close();

// ---- kill_process ------------------------------------------------------------
const ready = (id) => until(async () => (await out(id)).sc.output?.some((l) => l.content === "ready"));
r = await run({ command: "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.1; done" });
const trapper = r.sc.processId;
await ready(trapper);
let k = await call(c, "kill_process", { processId: trapper, signal: "SIGUSR1" });
const got = await until(async () => (await out(trapper)).sc.output.some((l) => l.content === "got-usr1"), 30000);
check("003-R37", "kill_process: Sends a signal to a background process (signal?: string)", !k.isError && got, k.sc);

r = await run({ command: "sleep 300" });
const paused = r.sc.processId;
await until(async () => (await find(paused))?.status === "running");
k = await call(c, "kill_process", { processId: paused, signal: "SIGSTOP" });
q = await find(paused);
check("003-R38", "Control processes - Kill, pause, or send signals to running processes: a paused process is not running (stopped, no exitCode)",
  k.sc.previousStatus === "running" && k.sc.newStatus === "stopped" && q.status === "stopped" && q.exitCode === undefined && q.paused === true, { k: k.sc, q });
k = await call(c, "kill_process", { processId: paused, signal: "SIGCONT" });
q = await find(paused);
check("003-R39", "Control processes: a paused process continues (SIGCONT) and runs again", k.sc.newStatus === "running" && q.status === "running" && !q.paused, { k: k.sc, q });

k = await call(c, "kill_process", { processId: sleeper });
check("003-R40", "kill_process returns processId, previousStatus, newStatus, killed (signal default \"SIGTERM\")",
  k.sc.processId === sleeper && k.sc.previousStatus === "running" && k.sc.newStatus === "killed" && k.sc.killed === true, k.sc);
r = await run({ command: "trap '' TERM; echo ready; while :; do sleep 0.1; done" });
const stubborn = r.sc.processId;
await ready(stubborn);
k = await call(c, "kill_process", { processId: stubborn, force: true });
q = await ended(stubborn);
check("003-R41", "force?: boolean // Use SIGKILL if true", k.sc.killed === true && q && q.status === "killed", { k: k.sc, q });
check("003-R42", "v2.5.2: killing processes does not crash the server (SIGTERM/SIGKILL handled)",
  (await call(c, "list_processes", {})).sc.processes.length > 0, null);

// ---- stream_process_output ----------------------------------------------------
r = await run({ command: "echo s1; sleep 1; echo s2" });
const streamer = r.sc.processId;
let seen = [];
let after = 0;
await until(async () => {
  const s = await call(c, "stream_process_output", { processId: streamer, afterLine: after, timeout: 5 });
  seen = seen.concat(s.sc.output || []);
  after = s.sc.nextLine ?? after;
  return seen.length >= 2;
});
check("003-R43", "Real-time streaming of output (stream_process_output tool)", seen.map((l) => l.content).join() === "s1,s2", seen);

// ---- Process limits -------------------------------------------------------------
const many = [];
let refused = null;
for (let i = 0; i < 51; i++) {
  const x = await call(c, "run_background", { command: "sleep 300", session: "crowd" });
  if (x.isError) { refused = x; break; }
  many.push(x.sc.processId);
}
check("003-R44", "Process Limits: Max 50 background processes per session (the 51st is refused)",
  many.length === 50 && refused && /50/.test(refused.text), { started: many.length, refused: refused?.text });
r = await run({ command: "sleep 300", session: "other" });
check("003-R45", "Process Limits: the limit is per session (another session starts more, up to Max 200 total)",
  !r.isError && r.sc.processId, r.text);

// ---- Sessions -------------------------------------------------------------------
r = await call(c, "list_shell_sessions", {});
let crowd = (r.sc.sessions || []).find((s) => s.name === "crowd");
check("003-R46", "Session State: Include background process count in list_shell_sessions",
  crowd && crowd.backgroundProcesses === 50, crowd);
check("003-R47", "Session State: Track resource usage per session",
  crowd && crowd.resources && typeof crowd.resources.memory === "number" && crowd.resources.memory > 0 && typeof crowd.resources.cpu === "number", crowd?.resources);
r = await call(c, "close_session", { session: "crowd" });
procs = await list({ session: "crowd", status: "running" });
check("003-R48", "Session Cleanup: When closing a session, prompt about running background processes (nothing is closed or killed unasked)",
  r.isError && /50/.test(r.text) && /kill/.test(r.text) && /transfer/.test(r.text) && procs.length === 50, { text: r.text, running: procs.length });
r = await call(c, "close_session", { session: "crowd", processes: "kill" });
procs = await until(async () => { const x = await list({ session: "crowd" }); return x.every((y) => y.status === "killed") ? x : null; });
check("003-R49", "Session Cleanup: Option to kill all; Prevent accidental process orphaning",
  !r.isError && r.sc.closed === true && procs && procs.length === 50, { r: r.sc, procs: procs?.length });

await call(c, "create_shell_session", { name: "work", cwd: tmp, env: { FROM_SESSION: "yes" } });
r = await run({ command: "echo $FROM_SESSION; pwd; sleep 300", session: "work" });
const worker = r.sc.processId;
o = await until(async () => { const x = await out(worker); return x.sc.output?.length >= 2 ? x : null; });
check("003-R50", "Starting Processes: spawn with cwd: session.cwd, env: { ...session.env, ...env }",
  o && o.sc.output[0].content === "yes" && [tmp, fs.realpathSync(tmp)].includes(o.sc.output[1].content), o?.sc.output);
r = await call(c, "close_session", { session: "work", processes: "transfer" });
q = await find(worker);
check("003-R51", "Session Cleanup: Option to transfer to default session",
  !r.isError && r.sc.closed === true && q.status === "running" && q.sessionName === "default", { r: r.sc, q });
await call(c, "kill_process", { processId: worker });

// ---- Migration path: run_command ---------------------------------------------------
r = await call(c, "run_command", { command: "echo", args: ["fg"] });
check("003-R52", "Migration Path: Existing run_command behavior unchanged (stdout, stderr, exitCode)",
  !r.isError && r.sc.stdout === "fg" && r.sc.exitCode === 0 && r.sc.success === true, r.sc);
r = await call(c, "run_command", { command: "sleep 300", runInBackground: true });
if (r.sc.processId) started.push(r.sc.processId);
q = r.sc.processId && await find(r.sc.processId);
check("003-R53", "Migration Path: Add runInBackground option to run_command",
  !r.isError && q && q.status === "running", { r: r.sc, q });

// ---- Persistence (v2.3.0): metadata and output survive a server restart ---------------
await c.close();
c = await connect("macos-shell");
q = await find(example);
o = await out(example);
check("003-R54", "Process persistence across server restarts: metadata and output persisted",
  q && q.command === "echo" && JSON.stringify(q.args) === JSON.stringify(["run", "build:watch"]) && o.sc.output?.[0]?.content === "run build:watch", { q, o: o.sc });
r = await call(c, "get_process_output", { processId: "no-such-process" });
check("003-R55", "Clear API with good error messages (an unknown processId)", r.isError && r.text.includes("Process 'no-such-process' not found"), r.text);

// ---- Resource management: cleanup ----------------------------------------------------
const st = jobsJSON("status", seq25);
check("003-R56", "Automatic cleanup of stopped processes after 1 hour", (st.job || st).ttl_ms === 3600000, st.job || st);

// ---- Stress: large volumes, rapid start/stop -----------------------------------------------
r = await run({ command: "seq", args: ["1", "200000"] });
const big = r.sc.processId;
await until(async () => (await find(big))?.status === "stopped", 120000);
o = await out(big, { lines: 3 });
check("003-R57", "Stress Tests: Large output volumes; Output capture works without data loss",
  o.sc.totalLines === 200000 && o.sc.output.map((l) => l.content).join() === "199998,199999,200000" && o.sc.output[2].lineNumber === 200000, { total: o.sc.totalLines, out: o.sc.output });
const rapid = [];
for (let i = 0; i < 10; i++) {
  const x = await run({ command: "sleep 300", session: "rapid" });
  rapid.push(x.sc.processId);
  await call(c, "kill_process", { processId: x.sc.processId });
}
procs = await list({ session: "rapid" });
check("003-R58", "Stress Tests: Rapid start/stop cycles", procs.length === 10 && procs.every((x) => x.status === "killed"), procs.map((x) => x.status));

// Leave nothing running.
for (const id of [...started, ...many]) {
  await call(c, "kill_process", { processId: id, force: true });
}
await c.close();
fs.rmSync(tmp, { recursive: true, force: true });
done();
