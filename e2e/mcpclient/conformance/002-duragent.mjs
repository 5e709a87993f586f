// Conformance suite of seed document 002 (Duragent's background processes),
// written from the document: every concrete requirement is a check named
// 002-Rn, with the document's words. It drives `jobs mcp --profile
// duragent` through the official TypeScript SDK client as an agent written
// against the document would, and reads the completion messages it is sent
// (logging notifications, once it sets a level).
//
//   node conformance/002-duragent.mjs /path/to/jobs
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { bin, suite, call, check, done, until, eq } from "./lib.mjs";

suite("002-duragent");

const STATUSES = ["running", "completed", "failed", "lost", "timed_out"];
const tmuxInstalled = (() => {
  try {
    execFileSync("tmux", ["-V"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

// The server runs in a directory of its own: the agent's working
// directory, where the document's .duragent/processes/ files are.
const base = fs.mkdtempSync(path.join(os.tmpdir(), "c002-"));
const agentDir = path.join(base, "agent");
fs.mkdirSync(agentDir);
const tmuxSocket = "jobs-c002-" + process.pid;
const env = { JOBS_SCOPE: process.env.JOBS_SCOPE || "conformance-002", JOBS_TMUX_SOCKET: tmuxSocket };

// connect opens a session of the duragent profile in dir, with notices:
// every completion message it is sent is kept in .messages.
async function connect(extra = {}, dir = agentDir) {
  const client = new Client({ name: "duragent-conformance", version: "1.0.0" });
  client.messages = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    if (typeof n.params.data === "string") client.messages.push(n.params.data);
  });
  const transport = new StdioClientTransport({
    command: bin,
    args: ["mcp", "--profile", "duragent"],
    env: { ...process.env, ...env, ...extra },
    cwd: dir,
    stderr: "inherit",
  });
  await client.connect(transport);
  await client.setLoggingLevel("info");
  return client;
}

const completionsOf = (c, handle) => c.messages.filter((m) => m.startsWith(`[Background Process Completed]\n\nHandle: ${handle}\n`));
const statusOf = async (c, handle) => (await call(c, "process", { action: "status", handle })).sc;
const waitStatus = async (c, handle, want) => until(async () => {
  const s = await statusOf(c, handle);
  return want.includes(s.status) ? s : null;
}, 60000, 100);
const seen = new Set(); // every status a result showed
const note = (sc) => {
  if (sc && typeof sc.status === "string") seen.add(sc.status);
  for (const p of sc?.processes || []) seen.add(p.status);
  return sc;
};
const resource = async (c, handle) => JSON.parse((await c.readResource({ uri: `jobs://${handle}` })).contents[0].text);
const metaPath = (handle) => path.join(agentDir, ".duragent", "processes", `${handle}.meta.json`);
const logPath = (handle) => path.join(agentDir, ".duragent", "processes", `${handle}.log`);
const readMeta = (handle) => {
  try {
    return JSON.parse(fs.readFileSync(metaPath(handle), "utf8"));
  } catch {
    return null;
  }
};
const readLog = (handle) => {
  try {
    return fs.readFileSync(logPath(handle), "utf8");
  } catch {
    return null;
  }
};
const listDir = (d) => {
  try {
    return fs.readdirSync(d);
  } catch {
    return [];
  }
};
const completionRE = /^\[Background Process Completed\]\n\nHandle: (.*)\nLabel: (.*)\nCommand: (.*)\nExit code: (.*)\nDuration: (.*)\n\nOutput \(last 2000 chars\):\n([\s\S]*)$/;

const c = await connect();

// ---- Tools ----
const { tools } = await c.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
check("002-R1", "Tools: spawn_process — Start a background command; process — Interact with running processes", byName.spawn_process && byName.process, Object.keys(byName));
const props = byName.spawn_process?.inputSchema?.properties || {};
check("002-R2", "spawn_process takes command, workdir, wait, tmux, label (and timeout_seconds: configurable per spawn call)",
  ["command", "workdir", "wait", "tmux", "label", "timeout_seconds"].every((p) => p in props) &&
  props.wait?.type === "boolean" && props.tmux?.type === "boolean" && props.command?.type === "string", props);
const actions = byName.process?.inputSchema?.properties?.action?.enum || [];
check("002-R3", "process actions: list, status, log, capture, send_keys, write, kill",
  ["list", "status", "log", "capture", "send_keys", "write", "kill"].every((a) => actions.includes(a)), actions);

// ---- Scenario 2: fire and forget ----
let r = await call(c, "spawn_process", { command: "echo started; read x; echo got:$x; sleep 30", workdir: base, wait: false, label: "build-feature-x" });
const bg = r.sc.handle;
note(r.sc);
check("002-R4", "Returns (when wait: false) immediately with {handle, status: \"running\", pid}",
  !r.isError && typeof bg === "string" && bg.length > 0 && r.sc.status === "running" && Number.isInteger(r.sc.pid) && r.sc.pid > 0, r.sc);

// ---- Scenario 1: synchronous ----
r = await call(c, "spawn_process", { command: "echo out; echo err >&2; pwd", workdir: base, wait: true });
note(r.sc);
const lines = (r.sc.output || "").split("\n");
check("002-R5", "Returns (when wait: true) {status: \"completed\", exit_code: 0, output: stdout/stderr content, duration_seconds}",
  r.sc.status === "completed" && r.sc.exit_code === 0 && ["out", "err"].every((l) => lines.includes(l)) && typeof r.sc.duration_seconds === "number", r.sc);
check("002-R6", "duration_seconds is a number of seconds (e.g. 142): a whole number, as in the example",
  Number.isInteger(r.sc.duration_seconds) && r.sc.duration_seconds >= 0, r.sc.duration_seconds);
check("002-R7", "workdir: the command runs in /path/to/project", lines.includes(fs.realpathSync(base)) || lines.includes(base), r.sc.output);
const waited = r.sc.handle;
const inline = [waited]; // the wait: true spawns: no completion message for them
r = await call(c, "spawn_process", { command: "echo bad; exit 4", wait: true });
note(r.sc);
inline.push(r.sc.handle);
check("002-R8", "status: failed for a process that exits non-zero, with its exit_code", r.sc.status === "failed" && r.sc.exit_code === 4, r.sc);

// Output (last 2000 chars): a long last line is cut, not dropped.
r = await call(c, "spawn_process", { command: "head -c 5000 /dev/zero | tr '\\0' x; echo; echo TAIL", wait: true });
note(r.sc);
inline.push(r.sc.handle);
check("002-R9", "wait: true output is the final output's last 2000 chars (a 5 KB line then TAIL: 2000 chars ending in TAIL)",
  typeof r.sc.output === "string" && [...r.sc.output].length === 2000 && r.sc.output.endsWith("x\nTAIL\n") && r.sc.output.startsWith("xxx"),
  { length: r.sc.output?.length, end: r.sc.output?.slice(-20) });

// ---- process actions ----
r = await call(c, "process", { action: "list" });
note(r.sc);
check("002-R10", "list: List all processes for this session",
  (r.sc.processes || []).some((p) => p.handle === bg && p.label === "build-feature-x" && p.status === "running") &&
  (r.sc.processes || []).some((p) => p.handle === waited && p.status === "completed"), r.sc);
r = await call(c, "process", { action: "status", handle: bg });
note(r.sc);
check("002-R11", "status: Check if a process is running/completed/failed", r.sc.handle === bg && r.sc.status === "running", r.sc);
await until(async () => (await call(c, "process", { action: "log", handle: bg })).sc.output?.includes("started"));
r = await call(c, "process", { action: "log", handle: bg, offset: 0, limit: 1 });
check("002-R12", "log: Read process output from log file (with offset/limit)", r.sc.output === "started\n", r.sc);
r = await call(c, "process", { action: "write", handle: bg, data: "hello\n" });
const wrote = !r.isError && (await until(async () => (await call(c, "process", { action: "log", handle: bg })).sc.output?.includes("got:hello")));
check("002-R13", "write: Write to process stdin (no tmux needed)", wrote, r.text);
r = await call(c, "process", { action: "capture", handle: bg });
check("002-R14", "capture requires tmux: refused for a process without tmux, naming only this profile's tools",
  r.isError && !r.text.includes("execute_command") && r.text.includes("tmux"), r.text);
r = await call(c, "process", { action: "send_keys", handle: bg, keys: "y" });
check("002-R15", "send_keys requires tmux: refused for a process without tmux, naming only this profile's tools",
  r.isError && !r.text.includes("execute_command") && r.text.includes("tmux"), r.text);

// ---- Timeout ----
const res = await resource(c, bg);
check("002-R16", "Timeout default: 30 minutes", res.timeout_ms === 1800000, res.timeout_ms);
const t0 = Date.now();
r = await call(c, "spawn_process", { command: "trap 'echo got TERM' TERM; echo ready; while :; do sleep 0.1; done", wait: true, timeout_seconds: 2 }, { timeout: 120000 });
note(r.sc);
inline.push(r.sc.handle);
check("002-R17", "Reported as distinct timed_out status (separate from failed)", r.sc.status === "timed_out", r.sc);
const graceMS = (r.sc.duration_ms ?? r.sc.duration_seconds * 1000) - 2000;
check("002-R18", "On timeout: SIGTERM, wait 5s, SIGKILL (a process that ignores SIGTERM lives 5 s after it)",
  (r.sc.output || "").includes("ready\n") && (r.sc.output || "").includes("got TERM") && graceMS >= 4500, { output: r.sc.output, duration_ms: r.sc.duration_ms, call_ms: Date.now() - t0 });

// ---- kill ----
r = await call(c, "process", { action: "kill", handle: bg });
note(r.sc);
const killed = await waitStatus(c, bg, ["completed", "failed", "lost", "timed_out", "killed"]);
note(killed);
check("002-R19", "kill: Terminate a process", !r.isError && r.sc.handle === bg && killed && killed.status !== "running", { kill: r.sc, status: killed });
check("002-R20", "Statuses are the document's: running, completed, failed, lost, timed_out (a killed process reads failed)",
  killed?.status === "failed" && [...seen].every((s) => STATUSES.includes(s)), [...seen]);
r = await call(c, "process", { action: "status", handle: "proc-nosuch" });
check("002-R21", "An unknown handle is an error naming it", r.isError && r.text.includes("proc-nosuch"), r.text);

// ---- Completion callbacks ----
r = await call(c, "spawn_process", { command: "head -c 5000 /dev/zero | tr '\\0' y; echo; echo DONE-TAIL; exit 3", wait: false, label: "notify-me" });
const fire = r.sc.handle;
await until(() => completionsOf(c, fire).length > 0);
const msg = completionsOf(c, fire)[0] || "";
const m = completionRE.exec(msg);
check("002-R22", "When a process exits (wait: false), inject a message: [Background Process Completed]\\n\\nHandle: {handle}\\nLabel: {label}\\nCommand: {command}\\nExit code: {code}\\nDuration: {duration}\\n\\nOutput (last 2000 chars):\\n{tail}",
  m && m[1] === fire && m[2] === "notify-me" && m[3].includes("DONE-TAIL") && m[4] === "3" && m[5].length > 0, msg.slice(0, 400));
check("002-R23", "Message includes the final output (tail): the last 2000 chars",
  m && [...m[6]].length === 2000 && m[6].endsWith("y\nDONE-TAIL\n"), { length: m?.[6]?.length, end: m?.[6]?.slice(-20) });
// The wait: true spawns above ended before fire started: their messages,
// had any been sent, would have come before fire's.
check("002-R24", "Only fires if wait: false (synchronous mode handles it inline)",
  inline.every((h) => h && completionsOf(c, h).length === 0), { inline, messages: c.messages.map((x) => x.slice(0, 80)) });
check("002-R25", "One completion message per process exit", completionsOf(c, fire).length === 1, completionsOf(c, fire).length);

// ---- Files: .duragent/processes/<handle>.log and .meta.json ----
r = await call(c, "spawn_process", { command: "echo file-line-1; read x; echo file-line-2", wait: false, label: "files" });
const fh = r.sc.handle;
const metaRunning = await until(() => {
  const mt = readMeta(fh);
  return mt && mt.status === "running" && (readLog(fh) || "").includes("file-line-1") ? mt : null;
});
check("002-R26", ".duragent/processes/<handle>.log: raw output (stdout/stderr), in the agent's working directory",
  (readLog(fh) || "").includes("file-line-1"), { dir: fs.readdirSync(agentDir), log: readLog(fh) });
check("002-R27", ".duragent/processes/<handle>.meta.json: metadata (command, pid, status, timestamps), running while it runs",
  metaRunning && metaRunning.command?.includes("file-line-1") && metaRunning.pid > 0 && metaRunning.handle === fh, readMeta(fh));
await call(c, "process", { action: "write", handle: fh, data: "go\n" });
const metaDone = await until(() => {
  const mt = readMeta(fh);
  return mt && mt.status === "completed" ? mt : null;
});
check("002-R28", "The .meta.json file is updated on every state transition (spawned → running → completed/failed/lost)",
  metaDone && metaDone.exit_code === 0 && (readLog(fh) || "").includes("file-line-2"), { meta: readMeta(fh), log: readLog(fh) });
const leftovers = listDir(path.dirname(metaPath(fh))).filter((f) => f.includes(".tmp"));
check("002-R29", "meta written with atomic writes (temp file + rename): no temporary file left", metaDone && leftovers.length === 0, leftovers);
execFileSync(bin, ["rm", fh], { env: { ...process.env, ...env } });
const gone = await until(() => !fs.existsSync(metaPath(fh)) && !fs.existsSync(logPath(fh)));
check("002-R30", "Log files and metadata cleaned up with the registry entry", metaDone && gone, listDir(path.dirname(metaPath(fh))));
check("002-R31", "Completed/lost processes kept for 30 minutes, then removed", (await resource(c, waited)).ttl_ms === 1800000, (await resource(c, waited)).ttl_ms);

// ---- Scoping ----
const other = await connect({ JOBS_SCOPE: env.JOBS_SCOPE + "-other" }, base);
r = await call(other, "process", { action: "list" });
const r2 = await call(other, "process", { action: "status", handle: waited });
check("002-R32", "Scoped per agent session (processes from session A not visible to session B)",
  !(r.sc.processes || []).some((p) => p.handle === waited) && r2.isError, { list: r.sc, status: r2.text });
await other.close();

// ---- tmux ----
if (tmuxInstalled) {
  r = await call(c, "spawn_process", { command: "read line; echo got:$line; read more; exit 0", tmux: true, wait: false, label: "tmux" });
  note(r.sc);
  const th = r.sc.handle;
  check("002-R33", "tmux session naming: duragent-<handle>", r.sc.tmux_session === `duragent-${th}` && r.sc.status === "running", r.sc);
  let attachable = false;
  try {
    execFileSync("tmux", ["-L", tmuxSocket, "has-session", "-t", `=duragent-${th}`], { stdio: "ignore" });
    attachable = true;
  } catch {}
  check("002-R34", "Human can observe via tmux attach -t <session> (the agent can tell the user how)",
    attachable && (r.sc.attach_command || "").includes("attach") && r.sc.attach_command.includes(`duragent-${th}`), { has: `tmux -L ${tmuxSocket} has-session -t =duragent-${th}`, attach: r.sc.attach_command });
  r = await call(c, "process", { action: "send_keys", handle: th, keys: "hello" });
  check("002-R35", "send_keys: Send keystrokes to process (tmux send-keys -t <session> \"<keys>\" Enter)", !r.isError, r.text);
  const screen = await until(async () => {
    const x = await call(c, "process", { action: "capture", handle: th });
    return (x.sc.content || "").includes("got:hello") ? x.sc.content : null;
  });
  check("002-R36", "capture: Capture current screen content (clean text)", screen && !screen.includes("\x1b"), screen);
  await call(c, "process", { action: "send_keys", handle: th, keys: "bye" });
  const tdone = await waitStatus(c, th, ["completed", "failed", "lost", "timed_out"]);
  check("002-R37", "A tmux process's exit is monitored: status completed", tdone?.status === "completed", tdone);
}

// ---- Without tmux: tmux: true falls back to a plain process ----
const noTmux = path.join(base, "bin");
fs.mkdirSync(noTmux);
for (const d of ["/usr/local/bin", "/usr/bin", "/bin"]) {
  let names = [];
  try {
    names = fs.readdirSync(d);
  } catch {}
  for (const n of names) {
    if (n === "tmux" || fs.existsSync(path.join(noTmux, n))) continue;
    try {
      fs.symlinkSync(path.join(d, n), path.join(noTmux, n));
    } catch {}
  }
}
// supervisorsOf returns the pids of the jobs supervise processes that run
// with runtime as their XDG_RUNTIME_DIR.
function supervisorsOf(runtime) {
  const pids = [];
  for (const p of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const argv = fs.readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0");
      const envp = fs.readFileSync(`/proc/${p}/environ`, "utf8").split("\0");
      if (argv[0] === bin && argv.includes("supervise") && envp.includes(`XDG_RUNTIME_DIR=${runtime}`)) pids.push(Number(p));
    } catch {}
  }
  return pids;
}
const lone = path.join(base, "lone");
fs.mkdirSync(lone);
const plain = await connect({ PATH: noTmux, JOBS_DB: path.join(lone, "jobs.db"), XDG_RUNTIME_DIR: lone }, lone);
r = await call(plain, "spawn_process", { command: "echo plain-ok", tmux: true, wait: true });
note(r.sc);
check("002-R38", "tmux available + tmux:true? No: a plain process (Without tmux: always available)",
  !r.isError && r.sc.status === "completed" && (r.sc.output || "").includes("plain-ok") && !r.sc.tmux_session, r.isError ? r.text : r.sc);
r = await call(plain, "spawn_process", { command: "echo bg-ok; sleep 30", tmux: true, wait: false });
const ph = r.sc.handle;
const r3 = await call(plain, "process", { action: "capture", handle: ph });
check("002-R39", "Everything works without tmux (degraded: no capture/send_keys/attach)",
  !r.isError && r.sc.status === "running" && r3.isError && !r3.text.includes("execute_command"), { spawn: r.isError ? r.text : r.sc, capture: r3.text });
await call(plain, "process", { action: "kill", handle: ph });
await plain.close();
// That client's supervisor runs in lone, which the end of the script
// removes: it is stopped first (left running, it wrote there while the
// directory was being removed).
const loneSups = supervisorsOf(lone);
for (const p of loneSups) process.kill(p, "SIGTERM");
await until(() => loneSups.every((p) => !fs.existsSync(`/proc/${p}/cmdline`) || fs.readFileSync(`/proc/${p}/cmdline`).length === 0));

// ---- Synchronous mode timeout ----
// The document lets wait: true block past the default 2 min; an MCP client
// gives up on a request after about a minute, so jobs returns at its call
// bound with the process still running, and tells of its end as of a
// wait: false one's.
const short = await connect({ JOBS_MCP_CALL_BOUND_MS: "1000" });
r = await call(short, "spawn_process", { command: "sleep 3; echo slow-done", wait: true });
const slow = r.sc.handle;
await until(() => completionsOf(short, slow).length > 0);
check("002-R45", "Synchronous mode timeout: a wait: true call that outlives the call bound returns the running process, and its completion message follows",
  r.sc.status === "running" && slow && completionsOf(short, slow).length === 1 && completionsOf(short, slow)[0].includes("slow-done"),
  { result: r.sc, messages: short.messages.map((x) => x.slice(0, 80)) });
await short.close();

// ---- Crash recovery ----
// A plain process and (with tmux) a tmux process; then the supervisor
// holding the plain one dies, as Duragent would crash.
r = await call(c, "spawn_process", { command: "echo plain-before; sleep 60", wait: false, label: "plain" });
const lostH = r.sc.handle;
let tmuxH = null;
if (tmuxInstalled) {
  r = await call(c, "spawn_process", { command: "echo tmux-before; read x; echo tmux-after", tmux: true, wait: false, label: "adopt" });
  tmuxH = r.sc.handle;
}
await until(async () => (await call(c, "process", { action: "log", handle: lostH })).sc.output?.includes("plain-before"));
await c.close();
// The supervisors of this run.
const sups = supervisorsOf(process.env.XDG_RUNTIME_DIR);
for (const p of sups) process.kill(p, "SIGKILL");
const c2 = await connect();
const lostS = await waitStatus(c2, lostH, ["lost", "completed", "failed", "timed_out"]);
note(lostS);
check("002-R40", "For non-tmux processes → mark as \"lost\" (no way to re-attach to a plain subprocess)", sups.length > 0 && lostS?.status === "lost", { supervisors: sups, status: lostS });
await until(() => completionsOf(c2, lostH).length > 0);
check("002-R41", "Fire completion callbacks for any processes that finished while Duragent was down",
  completionsOf(c2, lostH).length === 1, c2.messages.map((x) => x.slice(0, 80)));
const lostMeta = await until(() => readMeta(lostH)?.status === "lost" ? readMeta(lostH) : null);
check("002-R42", "meta.json marked lost after recovery", lostMeta?.status === "lost", readMeta(lostH));
if (tmuxH) {
  const st = await statusOf(c2, tmuxH);
  check("002-R43", "If tmux session alive → re-register in ProcessRegistry, resume exit monitoring", st.status === "running", st);
  await call(c2, "process", { action: "send_keys", handle: tmuxH, keys: "go" });
  const end = await waitStatus(c2, tmuxH, ["completed", "failed", "lost", "timed_out"]);
  await until(() => completionsOf(c2, tmuxH).length > 0);
  check("002-R44", "A re-adopted tmux process's exit is seen and its completion message sent",
    end?.status === "completed" && completionsOf(c2, tmuxH).length === 1, { end, messages: c2.messages.map((x) => x.slice(0, 80)) });
}
await c2.close();
try {
  execFileSync("tmux", ["-L", tmuxSocket, "kill-server"], { stdio: "ignore" });
} catch {}
fs.rmSync(base, { recursive: true, force: true });
done();
