// Conformance suite of seed document 004 (a TypeScript module: Claude
// Code-style background shells: spawnBackground, readProcessOutput,
// killProcess, listProcesses and the tool definitions of bash_output,
// kill_shell and list_shells), against `jobs mcp --profile claude-code`.
// Written from the document: each check quotes what the document says,
// and an agent written against the document would call the tools exactly
// so. run_command with run_in_background: true is the document's
// spawnBackground.
//
//   node conformance/004-claude-code.mjs /path/to/jobs
import { execFileSync } from "node:child_process";
import { mkdtempSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bin, suite, connect, call, check, done, until, eq } from "./lib.mjs";

suite("004-claude-code");

const c = await connect("claude-code", { CONFORMANCE_004_MARK: "inherited-value" });
const spawn = (command, opts = {}) => call(c, "run_command", { command, run_in_background: true, ...opts });
const read = (bash_id, filter) => call(c, "bash_output", filter === undefined ? { bash_id } : { bash_id, filter });
const statusOf = async (id) => (await call(c, "list_shells", {})).sc.shells?.find((s) => s.id === id);
// ended waits (a deadline for a slow machine) until list_shells shows id ended.
const ended = (id) => until(async () => {
  const s = await statusOf(id);
  return s && s.status !== "running" ? s : null;
});
// readAll reads as a client of the document does, with repeated
// bash_output until the process has ended and a read brings nothing new
// (it knows no "pending"); it returns every line of each stream.
async function readAll(id) {
  const out = [], errs = [];
  let last;
  await until(async () => {
    last = await read(id);
    if (last.sc.newOutput) out.push(...last.sc.newOutput.split("\n"));
    if (last.sc.newErrors) errs.push(...last.sc.newErrors.split("\n"));
    return last.sc.status !== "running" && !last.sc.newOutput && !last.sc.newErrors;
  }, 120000, 50);
  return { out, errs, last };
}

// ── Tool definitions ────────────────────────────────────────────────────
const { tools } = await c.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
check("004-R1", "Tools: run_command with run_in_background: true; bash_output; kill_shell; list_shells",
  ["run_command", "bash_output", "kill_shell", "list_shells"].every((n) => byName[n]) &&
  byName.run_command.inputSchema?.properties?.run_in_background?.type === "boolean", Object.keys(byName));
const bo = byName.bash_output;
check("004-R2", "bash_output: \"Read output from a running or completed background shell process. Returns only NEW output since the last read.\"; bash_id (string, required), filter (string, optional regex)",
  bo?.description === "Read output from a running or completed background shell process. Returns only NEW output since the last read." &&
  bo.inputSchema?.properties?.bash_id?.type === "string" && bo.inputSchema?.properties?.filter?.type === "string" &&
  eq(bo.inputSchema?.required, ["bash_id"]), bo);
const ks = byName.kill_shell;
check("004-R3", "kill_shell: \"Terminate a running background shell process\"; shell_id (string, required)",
  ks?.description === "Terminate a running background shell process" && ks.inputSchema?.properties?.shell_id?.type === "string" &&
  eq(ks.inputSchema?.required, ["shell_id"]), ks);
const ls = byName.list_shells;
check("004-R4", "list_shells: \"List all background shell processes (running and recent completed)\"; no parameters",
  ls?.description === "List all background shell processes (running and recent completed)" &&
  Object.keys(ls.inputSchema?.properties || {}).length === 0 && (ls.inputSchema?.required || []).length === 0, ls);
const rp = byName.run_command?.inputSchema?.properties || {};
check("004-R5", "spawnBackground(command, { cwd?, timeout? (ms), description? })",
  rp.command && rp.cwd && rp.timeout && rp.description, rp);

// ── spawnBackground: a process still running after the validation wait ──
let r = await spawn("for i in $(seq 1 12); do echo line$i; done; echo; echo '   '; for i in 1 2 3 4 5 6; do echo err$i >&2; done; echo '  indented'; sleep 60");
const dev = r.sc.id;
const devLines = (r.sc.message || "").split("\n");
check("004-R6", "returns { id, message, status } with status \"running\" for a process running after the 1.5 s validation wait",
  typeof dev === "string" && dev.length > 0 && r.sc.status === "running" && typeof r.sc.message === "string", r.sc);
check("004-R7", "message: \"✓ Background process running\", \" PID: ${child.pid}\", \" ID: ${id}\", \" Command: ${command}\"",
  devLines[0] === "✓ Background process running" && /^ PID: \d+$/.test(devLines[1]) && devLines[2] === ` ID: ${dev}` &&
  devLines[3] === " Command: for i in $(seq 1 12); do echo line$i; done; echo; echo '   '; for i in 1 2 3 4 5 6; do echo err$i >&2; done; echo '  indented'; sleep 60", devLines);
check("004-R8", "\" Initial output (${outputBuffer.length} lines):\" with the real count of non-blank stdout lines, the first 8 as \" ${l}\", then \" ... +${length - 8} more lines\"",
  eq(devLines.slice(4, 14), [" Initial output (13 lines):", " line1", " line2", " line3", " line4", " line5", " line6", " line7", " line8", " ... +5 more lines"]), devLines);
check("004-R9", "\" Stderr (${errorBuffer.length} lines):\" then its first 4 lines",
  eq(devLines.slice(14, 19), [" Stderr (6 lines):", " err1", " err2", " err3", " err4"]), devLines);
check("004-R10", "last line: \" Use bash_output(\"${id}\") to check output, kill_shell(\"${id}\") to stop.\"",
  devLines[19] === ` Use bash_output("${dev}") to check output, kill_shell("${dev}") to stop.` && devLines.length === 20, devLines);

// ── spawnBackground: a process that fails inside the validation wait ────
r = await spawn("echo boom >&2; echo >&2; echo bang >&2; exit 3");
const boom = r.sc.id;
check("004-R11", "a process failed within the wait: status \"failed\", message \"✕ Process failed immediately\\n Command: …\\n Error: ${errorBuffer.join(\"\\n \")}\\n Exit code: ${exitCode}\"",
  r.sc.status === "failed" && typeof boom === "string" && boom.length > 0 &&
  r.sc.message === "✕ Process failed immediately\n Command: echo boom >&2; echo >&2; echo bang >&2; exit 3\n Error: boom\n bang\n Exit code: 3", r.sc);
r = await spawn("exit 4");
check("004-R12", "the \" Error:\" line only when the error buffer holds lines",
  r.sc.status === "failed" && r.sc.message === "✕ Process failed immediately\n Command: exit 4\n Exit code: 4", r.sc);

// A process that exits 0 within the wait is not "failed": the document
// reports it with the running message.
r = await spawn("echo quick-a1; echo quick-b2; echo QUICK-A3");
const quick = r.sc.id;
check("004-R13", "status is \"running\" | \"failed\": a process that completed within the wait gets the \"✓ Background process running\" message",
  r.sc.status === "running" && r.sc.message?.startsWith("✓ Background process running\n") &&
  r.sc.message.includes(" Initial output (3 lines):\n quick-a1\n quick-b2\n QUICK-A3\n"), r.sc);

// The document's buffer holds a piece without its newline too.
r = await spawn("printf 'no newline yet'; sleep 60");
const unterminated = r.sc.id;
check("004-R51", "Initial output counts what the buffer holds: an unterminated piece is shown (\" no newline yet\")",
  r.sc.status === "running" && r.sc.message?.includes(" Command: printf 'no newline yet'; sleep 60\n Initial output (1 lines):\n no newline yet\n Use bash_output("), r.sc);
await call(c, "kill_shell", { shell_id: unterminated });

// A spawn that cannot happen is reported in the document's words, not as a
// protocol error.
r = await spawn("echo never", { cwd: "/nonexistent/conformance-004" });
check("004-R52", "spawn failure: { status: \"failed\", message: \"Failed to spawn: ${err.message}\" }",
  !r.isError && r.sc.status === "failed" && r.sc.message?.startsWith("Failed to spawn: ") && r.sc.message.includes("/nonexistent/conformance-004"), r);

// ── spawn: shell, cwd, env, stdin ───────────────────────────────────────
r = await spawn("echo abc | tr a-c x-z");
await ended(r.sc.id);
let all = await readAll(r.sc.id);
check("004-R14", "spawn(command, [], { shell: true }): the command line runs in a shell", eq(all.out, ["xyz"]), all);

const dir = realpathSync(mkdtempSync(join(tmpdir(), "conf004-")));
r = await spawn("pwd", { cwd: dir });
await ended(r.sc.id);
all = await readAll(r.sc.id);
check("004-R15", "cwd: options.cwd", eq(all.out, [dir]), all);
r = await spawn("pwd");
await ended(r.sc.id);
all = await readAll(r.sc.id);
check("004-R16", "cwd default: process.cwd() (the server's)", eq(all.out, [process.cwd()]), { all, cwd: process.cwd() });

r = await spawn("echo color=$FORCE_COLOR mark=$CONFORMANCE_004_MARK");
await ended(r.sc.id);
all = await readAll(r.sc.id);
check("004-R17", "env: { ...process.env, FORCE_COLOR: \"0\" }", eq(all.out, ["color=0 mark=inherited-value"]), all);

r = await spawn("cat; echo after-cat");
const catID = r.sc.id;
const catEnd = await ended(catID);
all = await readAll(catID);
check("004-R18", "stdio: [\"ignore\", \"pipe\", \"pipe\"]: stdin is /dev/null, so `cat; echo after-cat` finishes",
  catEnd?.status === "completed" && eq(all.out, ["after-cat"]), { catEnd, all });
r = await spawn("read x; echo \"read-rc=$? x=[$x]\"");
await ended(r.sc.id);
all = await readAll(r.sc.id);
check("004-R19", "stdin ignored: a read gets end of file at once", eq(all.out, ["read-rc=1 x=[]"]), all);

// ── readProcessOutput ───────────────────────────────────────────────────
r = await read(dev);
check("004-R20", "bash_output returns { id, status, newOutput, newErrors } for a running process, no exitCode",
  r.sc.id === dev && r.sc.status === "running" && typeof r.sc.newOutput === "string" && typeof r.sc.newErrors === "string" &&
  !("exitCode" in r.sc) && !r.isError, r.sc);
const lines12 = Array.from({ length: 12 }, (_, i) => `line${i + 1}`);
check("004-R21", "newOutput: the new stdout lines joined with \"\\n\"; lines that are blank (line.trim() empty) are not kept; lines are not trimmed",
  r.sc.newOutput === [...lines12, "  indented"].join("\n"), r.sc.newOutput);
check("004-R22", "newErrors: the new stderr lines, apart from stdout (own read index)",
  r.sc.newErrors === "err1\nerr2\nerr3\nerr4\nerr5\nerr6", r.sc.newErrors);
r = await read(dev);
check("004-R23", "Returns only NEW output since the last read", r.sc.newOutput === "" && r.sc.newErrors === "" && r.sc.status === "running", r.sc);

r = await read(quick, "^quick-a");
check("004-R24", "filter: new RegExp(filter, \"i\") keeps only matching lines", r.sc.newOutput === "quick-a1\nQUICK-A3" && r.sc.status === "completed", r.sc);
r = await read(quick);
check("004-R25", "the read indices move before the filter: lines filtered out are read too", r.sc.newOutput === "", r.sc);

r = await spawn("echo keep-1; echo drop-2; echo keep-3 >&2");
await ended(r.sc.id);
const filt = await read(r.sc.id, "([");
check("004-R26", "an invalid filter regex returns the lines unfiltered", filt.sc.newOutput === "keep-1\ndrop-2" && filt.sc.newErrors === "keep-3", filt.sc);

r = await read("nosuch-process");
check("004-R27", "unknown id: { error: \"Process not found: ${id}. Use list_shells to see available processes.\" }",
  r.sc.error === "Process not found: nosuch-process. Use list_shells to see available processes.", r);

r = await spawn("echo partial-match-line; sleep 60");
const pm = r.sc.id;
r = await read(pm.slice(3, 10));
check("004-R28", "partial match: the first process whose id includes the given text", r.sc.id === pm && r.sc.newOutput === "partial-match-line", { pm, sc: r.sc });

r = await read(boom);
check("004-R29", "status \"failed\" and exitCode for a non-zero exit; stderr in newErrors",
  r.sc.status === "failed" && r.sc.exitCode === 3 && r.sc.newOutput === "" && r.sc.newErrors === "boom\nbang", r.sc);
r = await read(catID);
check("004-R30", "status \"completed\" and exitCode 0 for exit code 0", r.sc.status === "completed" && r.sc.exitCode === 0, r.sc);

// Every line, once, whole, in order: the buffers hold lines.
r = await spawn("seq 1 30000");
const seqID = r.sc.id;
all = await readAll(seqID);
const want = Array.from({ length: 30000 }, (_, i) => String(i + 1));
let firstBad = all.out.findIndex((l, i) => l !== want[i]);
check("004-R31", "`seq 1 30000` read with repeated bash_output: exactly 30000 lines, each once, whole, in order",
  all.out.length === 30000 && firstBad === -1 && all.errs.length === 0,
  { lines: all.out.length, firstBad, at: all.out.slice(Math.max(0, firstBad - 2), firstBad + 3) });

// A line written in pieces is one line; lines of stdout and stderr written
// in between do not cut it.
r = await spawn("printf 'wh'; echo e-first >&2; sleep 2; printf 'ole\\n'; echo e-second >&2; printf 'tail-without-newline'");
const pieces = r.sc.id;
const early = await read(pieces);
all = await readAll(pieces);
const outs = [early.sc.newOutput, ...all.out].filter(Boolean).join("\n").split("\n");
const errs = [early.sc.newErrors, ...all.errs].filter(Boolean).join("\n").split("\n");
check("004-R32", "a line is what one stream writes up to \"\\n\", returned once and whole; the unterminated last line comes when the process ends",
  eq(outs, ["whole", "tail-without-newline"]) && eq(errs, ["e-first", "e-second"]), { early: early.sc, all });

// A line longer than one bounded read, written in two pieces with stderr
// lines between them, read while it is being written: still one line.
r = await spawn("head -c 30000 /dev/zero | tr '\\0' a; echo e-one >&2; sleep 3; head -c 30000 /dev/zero | tr '\\0' b; echo; echo e-two >&2");
const longID = r.sc.id;
const mid = await read(longID);
all = await readAll(longID);
const longOut = [mid.sc.newOutput, ...all.out].filter(Boolean);
const longErr = [mid.sc.newErrors, ...all.errs].filter(Boolean).join("\n").split("\n");
check("004-R53", "a line longer than one read, interleaved with stderr lines, arrives once and whole",
  longOut.length === 1 && longOut[0] === "a".repeat(30000) + "b".repeat(30000) && eq(longErr, ["e-one", "e-two"]),
  { mid: { status: mid.sc.status, out: mid.sc.newOutput?.length, errs: mid.sc.newErrors }, outs: longOut.map((l) => l.length), longErr });

// ── timeout ─────────────────────────────────────────────────────────────
r = await spawn("echo before-timeout; sleep 30", { timeout: 300 });
const slow = r.sc.id;
check("004-R33", "timeout (ms): a process killed by it inside the wait is not \"failed\" (status \"killed\" → the running message)",
  r.sc.status === "running" && r.sc.message?.startsWith("✓ Background process running\n") &&
  r.sc.message.includes(" Stderr (1 lines):\n Process killed after 300ms timeout\n"), r.sc);
const slowEnd = await ended(slow);
r = await read(slow);
check("004-R34", "timeout: SIGTERM, status \"killed\", \"Process killed after ${timeout}ms timeout\" in the error buffer (returned once)",
  slowEnd?.status === "killed" && slowEnd.errorLines === 1 && r.sc.status === "killed" && r.sc.newOutput === "before-timeout" &&
  r.sc.newErrors === "Process killed after 300ms timeout", { slowEnd, sc: r.sc });
r = await read(slow);
check("004-R35", "the timeout line is a buffer line: not returned again", r.sc.newErrors === "" && r.sc.newOutput === "", r.sc);
let status = {};
try {
  status = JSON.parse(execFileSync(bin, ["status", dev, "--json"], { env: process.env }).toString()).job || {};
} catch (e) {
  status = { error: String(e) };
}
check("004-R36", "timeout default: 600_000 ms (10 minutes)", status.timeout_ms === 600000, status);

// ── listProcesses ───────────────────────────────────────────────────────
const listed = await call(c, "list_shells", {});
const shells = listed.sc.shells || [];
const d = shells.find((s) => s.id === dev);
check("004-R37", "list_shells: { id, pid, command, status, startedAt, runtime, outputLines, errorLines } per process",
  d && d.status === "running" && Number.isInteger(d.pid) && d.pid > 0 && typeof d.command === "string" &&
  /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(d.startedAt) && /^\d+s$/.test(d.runtime), d);
check("004-R38", "outputLines and errorLines: the non-blank lines of stdout and of stderr (outputBuffer.length, errorBuffer.length)",
  d?.outputLines === 13 && d?.errorLines === 6, d);
const q = shells.find((s) => s.id === catID);
check("004-R39", "pid: process?.pid, none once the process has exited", q && !("pid" in q) && q.status === "completed", q);
const seqShell = shells.find((s) => s.id === seqID);
check("004-R40", "MAX_BUFFER_LINES = 10000: a buffer holds at most 10000 lines", seqShell?.outputLines === 10000, seqShell);
const longCmd = "echo this-command-is-longer-than-fifty-characters-for-sure; true";
r = await spawn(longCmd);
await ended(r.sc.id);
const longShell = await statusOf(r.sc.id);
check("004-R41", "command: longer than 50 characters → the first 47 + \"...\"",
  longShell?.command === longCmd.slice(0, 47) + "...", longShell);
const ids = shells.map((s) => s.id);
check("004-R42", "listed in the order started (the registry's insertion order)",
  ids.indexOf(dev) < ids.indexOf(boom) && ids.indexOf(boom) < ids.indexOf(quick) && ids.indexOf(quick) < ids.indexOf(catID), ids);
check("004-R43", "the list_shells result text is the array", Array.isArray(JSON.parse(listed.text || "{}")) && JSON.parse(listed.text).length === shells.length, listed.text?.slice(0, 200));

// ── killProcess ─────────────────────────────────────────────────────────
r = await spawn("trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.1; done");
const termID = r.sc.id;
r = await call(c, "kill_shell", { shell_id: termID });
check("004-R44", "kill_shell: { success: true, message: \"Process ${id} killed\" }", eq(r.sc, { success: true, message: `Process ${termID} killed` }), r.sc);
const termRead = await until(async () => {
  const x = await read(termID);
  return x.sc.status !== "running" ? x : null;
});
check("004-R45", "kill: SIGTERM first (a process may clean up); status \"killed\" afterwards",
  termRead?.sc.status === "killed" && termRead.sc.newOutput.includes("got-term"), termRead?.sc);
r = await call(c, "kill_shell", { shell_id: termID });
check("004-R46", "kill of a process not running: { success: false, message: \"Process already ${status}\" }",
  eq(r.sc, { success: false, message: "Process already killed" }), r.sc);
r = await call(c, "kill_shell", { shell_id: catID });
check("004-R47", "\"Process already completed\" for a completed process", eq(r.sc, { success: false, message: "Process already completed" }), r.sc);
r = await call(c, "kill_shell", { shell_id: "nosuch-process" });
check("004-R48", "kill of an unknown id: { success: false, message: \"Process not found: ${id}\" }",
  eq(r.sc, { success: false, message: "Process not found: nosuch-process" }), r.sc);

r = await spawn("trap '' TERM; echo stubborn; while :; do sleep 0.1; done");
const stubborn = r.sc.id;
const stubbornPid = Number(/ PID: (\d+)/.exec(r.sc.message || "")?.[1]);
const killStart = Date.now();
r = await call(c, "kill_shell", { shell_id: stubborn });
const gone = await until(() => {
  try {
    process.kill(stubbornPid, 0);
    return false;
  } catch {
    return true;
  }
});
const waited = Date.now() - killStart;
check("004-R49", "SIGKILL after 5 seconds if still running (a process that ignores SIGTERM ends, not before 5 s)",
  r.sc.success === true && stubbornPid > 0 && gone && waited >= 4500, { sc: r.sc, stubbornPid, gone, waited });

r = await read(stubborn);
check("004-R54", "exitCode: code ?? undefined: none for a process a signal ended", r.sc.status === "killed" && !("exitCode" in r.sc), r.sc);

await call(c, "kill_shell", { shell_id: dev });
await call(c, "kill_shell", { shell_id: pm });

// ── MAX_PROCESSES: running and recent completed ─────────────────────────
const c2 = await connect("claude-code", { JOBS_SCOPE: "conformance-004-registry" });
r = await call(c2, "run_command", { command: "sleep 60", run_in_background: true });
const keeper = r.sc.id;
const quickIDs = [];
for (let i = 0; i < 21; i++) {
  r = await call(c2, "run_command", { command: `echo n${i}`, run_in_background: true });
  quickIDs.push(r.sc.id);
}
await until(async () => {
  const s = (await call(c2, "list_shells", {})).sc.shells || [];
  return s.filter((x) => x.status === "completed").length >= 19;
});
r = await call(c2, "list_shells", {});
const reg = (r.sc.shells || []).map((s) => s.id);
check("004-R50", "MAX_PROCESSES = 20: the oldest completed processes leave the list; running ones stay",
  reg.length === 20 && reg[0] === keeper && eq(reg.slice(1), quickIDs.slice(2)), { reg, keeper, quickIDs });
await call(c2, "kill_shell", { shell_id: keeper });
await c2.close();

await c.close();
done();
