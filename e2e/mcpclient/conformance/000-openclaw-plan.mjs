// Conformance of `jobs mcp` (profile openclaw, the default) to seed 000,
// "Process Tool Implementation Plan": every concrete requirement of the
// document is a check, with the document's words. Written from the
// document, not from the profile's code.
//
//   node conformance/000-openclaw-plan.mjs /path/to/jobs
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { bin, call, check, connect, done, eq, suite, until, waitSessionEnd } from "./lib.mjs";

suite("000-openclaw-plan");

const c = await connect("");
const { tools } = await c.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
const ids = [];

const waitEnd = waitSessionEnd;

// start runs a command in the background and returns its sessionId.
async function start(client, command, extra = {}) {
  const r = await call(client, "execute_command", { command, background: true, description: "conformance run", ...extra });
  ids.push(r.sc.sessionId);
  return r;
}

// --- Tool Schema -----------------------------------------------------------
const pp = byName.process?.inputSchema?.properties || {};
const preq = byName.process?.inputSchema?.required || [];
check("000-R1", "process tool: action: z.enum(['list', 'poll', 'log', 'write', 'kill', 'clear', 'remove'])",
  ["list", "poll", "log", "write", "kill", "clear", "remove"].every((a) => (pp.action?.enum || []).includes(a)), pp.action);
check("000-R2", "process tool: sessionId (string, optional), offset (int, min 0, log only), limit (int, min 1, log only), data (string, write only), eof (boolean, write only)",
  pp.sessionId?.type === "string" && !preq.includes("sessionId") && pp.offset?.type === "integer" && pp.limit?.type === "integer" &&
    pp.data?.type === "string" && pp.eof?.type === "boolean" && preq.every((p) => p === "action"), { pp, preq });
const ep = byName.execute_command?.inputSchema?.properties || {};
const ereq = byName.execute_command?.inputSchema?.required || [];
check("000-R3", "execute_command: command: z.string().min(1), timeout: z.number().min(100).optional(), description: z.string().min(5).max(100), background: z.boolean().optional(), yieldMs: z.number().min(100).optional()",
  ep.command?.type === "string" && ereq.includes("command") && ["number", "integer"].includes(ep.timeout?.type) && ep.description?.type === "string" &&
    ep.background?.type === "boolean" && ["number", "integer"].includes(ep.yieldMs?.type) && !ereq.includes("background") && !ereq.includes("yieldMs"),
  { ep, ereq });
let r = await call(c, "execute_command", { command: "", description: "empty command" });
check("000-R4", "execute_command: command: z.string().min(1) (an empty command is refused)", r.isError, r.text);
r = await call(c, "execute_command", { command: "true", description: "abc" });
const r2 = await call(c, "execute_command", { command: "true", description: "x".repeat(101) });
check("000-R5", "execute_command: description: z.string().min(5).max(100)", r.isError && r2.isError, [r.text, r2.text]);
r = await call(c, "execute_command", { command: "true", timeout: 50, description: "short timeout" });
check("000-R6", "execute_command: timeout: z.number().min(100) (milliseconds, as yieldMs beside it)", r.isError, r.text);

// --- Start Background Session ------------------------------------------------
r = await start(c, "echo started; sleep 300");
const bg = r.sc.sessionId;
check("000-R7", 'Start Background Session: execute_command with background=true … Return {status: "running", sessionId}',
  r.sc.status === "running" && typeof bg === "string" && bg.length > 0 && !r.isError, r.sc);
const running = await until(async () => {
  const p = await call(c, "process", { action: "poll", sessionId: bg });
  return p.sc.output === "started\n" ? p : null;
}, 60000);
check("000-R8", "Spawn child process with stdio pipes: the session keeps running after the tool returns, its output collected",
  running?.sc.status === "running", running?.sc);

// --- Poll Output ---------------------------------------------------------------
r = await call(c, "process", { action: "poll", sessionId: bg });
check("000-R9", "Poll Output: Return {status, output, exitCode?, offloaded?}",
  r.sc.status === "running" && typeof r.sc.output === "string" && typeof r.sc.offloaded === "boolean" && !("exitCode" in r.sc), r.sc);
check("000-R10", "Data Model: status: 'running' | 'done' | 'error' | 'killed'", ["running", "done", "error", "killed"].includes(r.sc.status), r.sc.status);

// The last 500 characters, on every poll.
r = await call(c, "execute_command", { command: "seq 1 300", description: "three hundred lines" });
ids.push(r.sc.sessionId);
const seq300 = Array.from({ length: 300 }, (_, i) => `${i + 1}\n`).join("");
const p1 = await call(c, "process", { action: "poll", sessionId: r.sc.sessionId });
const p2 = await call(c, "process", { action: "poll", sessionId: r.sc.sessionId });
check("000-R11", "Poll Response: … Else: return last 500 chars from buffer",
  p1.sc.output === seq300.slice(-500) && p2.sc.output === seq300.slice(-500), { first: p1.sc.output?.length, second: p2.sc.output?.length });
check("000-R12", "Poll Output: exitCode of a finished session; status done", p1.sc.status === "done" && p1.sc.exitCode === 0, p1.sc);
r = await call(c, "execute_command", { command: "exit 3", description: "exits with 3" });
ids.push(r.sc.sessionId);
check("000-R13", "Data Model: a command that fails is status 'error', with exitCode", r.sc.status === "error" && r.sc.exitCode === 3, r.sc);

// --- Write Input -------------------------------------------------------------------
r = await start(c, "cat");
const cat = r.sc.sessionId;
r = await call(c, "process", { action: "write", sessionId: cat, data: "hello\n" });
const echoed = await until(async () => (await call(c, "process", { action: "poll", sessionId: cat })).sc.output === "hello\n", 60000);
check("000-R14", "Write Input: BackgroundExecSessionManager.write() writes to child.stdin", !r.isError && echoed, r.text);
r = await call(c, "process", { action: "write", sessionId: cat, data: "bye\n", eof: true });
const ended = await waitEnd(c, cat);
check("000-R15", "Write Input: Optionally close stdin with eof=true", !r.isError && ended?.sc.status === "done" && ended?.sc.output === "hello\nbye\n", ended?.sc);

// --- Kill Session ----------------------------------------------------------------------
r = await start(c, "trap 'echo got TERM' TERM; echo ready; while :; do sleep 1; done");
const stubborn = r.sc.sessionId;
await until(async () => (await call(c, "process", { action: "poll", sessionId: stubborn })).sc.output?.includes("ready"), 60000);
const k0 = Date.now();
r = await call(c, "process", { action: "kill", sessionId: stubborn });
const killMs = Date.now() - k0;
const afterKill = await waitEnd(c, stubborn);
check("000-R16", "Kill Session: process action=\"kill\" … sends SIGTERM",
  !r.isError && (await until(async () => (await call(c, "process", { action: "log", sessionId: stubborn })).sc.output?.includes("got TERM"), 60000)), r.text);
check("000-R17", "Kill Session: Wait 2s, then SIGKILL if still running; Update session status",
  afterKill?.sc.status === "killed" && killMs >= 1500, { status: afterKill?.sc.status, killMs });
check("000-R18", "Kill Safety: SIGTERM before SIGKILL, timeout handling", afterKill?.sc.output?.includes("got TERM") && afterKill?.sc.status === "killed", afterKill?.sc);

// --- Offload Strategy ----------------------------------------------------------------------
// More than 10KB: 3000 lines of seq are 13893 bytes; then more after a line on stdin.
r = await start(c, "seq 1 3000; read x; seq 3001 4000");
const big = r.sc.sessionId;
const bigFirst = Array.from({ length: 3000 }, (_, i) => `${i + 1}\n`).join("");
const bigAll = bigFirst + Array.from({ length: 1000 }, (_, i) => `${i + 3001}\n`).join("");
const offPoll = await until(async () => {
  const p = await call(c, "process", { action: "poll", sessionId: big });
  return p.sc.offloaded && p.sc.output === bigFirst.slice(-500) ? p : null;
}, 60000);
const file = offPoll?.sc.outputFilePath || "";
check("000-R19", "Offload Strategy: When buffer > 10KB threshold: Write buffer to file … bgexec_<sessionId>.log",
  offPoll && path.isAbsolute(file) && path.basename(file) === `bgexec_${big}.log` && fs.existsSync(file) && fs.readFileSync(file, "utf8") === bigFirst,
  { sc: offPoll?.sc, file });
await call(c, "process", { action: "write", sessionId: big, data: "go\n" });
const bigEnd = await waitEnd(c, big);
check("000-R20", "Offload Strategy: Subsequent output appended directly to file",
  file && fs.readFileSync(file, "utf8") === bigAll, { size: file && fs.statSync(file).size, want: bigAll.length });
check("000-R21", "Poll Response: If offloaded: return last 500 chars from file",
  bigEnd?.sc.offloaded === true && bigEnd?.sc.output === bigAll.slice(-500), bigEnd?.sc);
r = await call(c, "process", { action: "log", sessionId: big, offset: 13890, limit: 10 });
check("000-R22", "Log Response: If offloaded: read from file with offset/limit",
  r.sc.offloaded === true && r.sc.output === bigAll.slice(13890, 13900), r.sc);
r = await call(c, "process", { action: "log", sessionId: bg, offset: 0, limit: 4 });
check("000-R23", "Log Response: Else: slice from buffer with offset/limit", r.sc.output === "star" && r.sc.offloaded === false, r.sc);
check("000-R24", "Data Model: outputFilePath: string|null // Offloaded content (>10KB); SessionMeta offloaded: boolean",
  (await call(c, "process", { action: "list" })).sc.sessions?.some((s) => s.sessionId === big && s.offloaded === true && s.outputFilePath === file), file);
check("000-R25", "Path Security: Offload files use resolved session directory (a private directory, the file not a link)",
  file && (fs.statSync(path.dirname(file)).mode & 0o777) === 0o700 && (fs.lstatSync(file).mode & 0o777) === 0o600 && fs.lstatSync(file).isFile() &&
    path.resolve(file) === file, file && { dir: (fs.statSync(path.dirname(file)).mode & 0o777).toString(8), file: (fs.lstatSync(file).mode & 0o777).toString(8) });

// --- SessionMeta (list) ------------------------------------------------------------------
r = await call(c, "process", { action: "list" });
const metas = r.sc.sessions || [];
const mBg = metas.find((m) => m.sessionId === bg);
const mCat = metas.find((m) => m.sessionId === cat);
check("000-R26", "SessionMeta { sessionId, command, status, createdAt, lastAccessedAt, pid?, exitCode?, outputLength, offloaded }",
  mBg && mCat && typeof mBg.command === "string" && mBg.status === "running" && typeof mBg.createdAt === "number" && typeof mBg.lastAccessedAt === "number" &&
    mBg.pid > 0 && !("exitCode" in mBg) && mBg.outputLength === 8 && mBg.offloaded === false && mCat.status === "done" && mCat.exitCode === 0 &&
    mCat.outputLength === 10, { mBg, mCat });
check("000-R27", "process tool: list", metas.length >= 6 && ids.filter((x) => x).every((id) => metas.some((m) => m.sessionId === id)), metas.length);

// --- clear and remove ------------------------------------------------------------------------
r = await call(c, "process", { action: "clear", sessionId: big });
const cleared = await call(c, "process", { action: "poll", sessionId: big });
check("000-R28", "Unit Tests: clear(): Verify buffer/file clearing",
  !r.isError && cleared.sc.output === "" && fs.existsSync(file) && fs.statSync(file).size === 0, { text: r.text, poll: cleared.sc });
r = await call(c, "process", { action: "remove", sessionId: bg });
const gone = await call(c, "process", { action: "poll", sessionId: bg });
check("000-R29", "Unit Tests: remove(): Verify complete cleanup (a running session is killed and removed)",
  !r.isError && gone.isError && gone.text.includes(`Session ${bg} not found`), { remove: r.text, poll: gone.text });
// Remove with cleanup failure: log warning, continue removal.
fs.chmodSync(path.dirname(file), 0o500);
r = await call(c, "process", { action: "remove", sessionId: big });
fs.chmodSync(path.dirname(file), 0o700);
const gone2 = await call(c, "process", { action: "poll", sessionId: big });
check("000-R30", "Error Handling: Remove with cleanup failure → Log warning, continue removal",
  !r.isError && gone2.isError && gone2.text.includes(`Session ${big} not found`), { remove: r.text, poll: gone2.text });
fs.rmSync(file, { force: true });
check("000-R31", "Unit Tests: remove(): the offloaded file goes with the session",
  await (async () => {
    const rr = await start(c, "seq 1 4000");
    const id = rr.sc.sessionId;
    const p = await until(async () => {
      const x = await call(c, "process", { action: "poll", sessionId: id });
      return x.sc.offloaded && x.sc.status === "done" ? x : null;
    }, 60000);
    const f = p?.sc.outputFilePath;
    await call(c, "process", { action: "remove", sessionId: id });
    return f && !fs.existsSync(f);
  })(), "file left after remove");

// --- Error Handling ------------------------------------------------------------------------------
r = await call(c, "process", { action: "poll", sessionId: "nosuchsession" });
check("000-R32", 'Error Handling: Session not found → Error: "Session X not found"', r.isError && r.text.includes("Session nosuchsession not found"), r.text);
r = await call(c, "process", { action: "write", sessionId: cat, data: "x" });
check("000-R33", 'Error Handling: Write to non-running session → Error: "Session X is not running"', r.isError && r.text.includes(`Session ${cat} is not running`), r.text);
r = await call(c, "process", { action: "kill", sessionId: stubborn });
check("000-R34", "Error Handling: Kill already dead session → No-op (idempotent)", !r.isError && (await call(c, "process", { action: "poll", sessionId: stubborn })).sc.status === "killed", r.text);
r = await start(c, "sleep 300");
const nostdin = r.sc.sessionId;
await call(c, "process", { action: "write", sessionId: nostdin, data: "", eof: true });
r = await call(c, "process", { action: "write", sessionId: nostdin, data: "x" });
check("000-R35", 'i18n: stdinNotAvailable: "Session {sessionId} stdin is not available"', r.isError && r.text.includes(`Session ${nostdin} stdin is not available`), r.text);
await call(c, "process", { action: "kill", sessionId: nostdin });
// File read error: return empty string, log warning (a poll never fails for the file's sake).
r = await start(c, "seq 1 4000");
const lostFile = r.sc.sessionId;
const lf = await until(async () => {
  const x = await call(c, "process", { action: "poll", sessionId: lostFile });
  return x.sc.offloaded && x.sc.status === "done" ? x : null;
}, 60000);
if (lf?.sc.outputFilePath) fs.rmSync(lf.sc.outputFilePath, { force: true });
r = await call(c, "process", { action: "poll", sessionId: lostFile });
check("000-R36", "Error Handling: File read error → Return empty string, log warning (never a failed poll)", lf && !r.isError && typeof r.sc.output === "string", r.text);

// --- Integration Tests ----------------------------------------------------------------------------
r = await call(c, "execute_command", { command: "echo integration; sleep 300", background: true, description: "integration test" });
const it = r.sc.sessionId;
const itPoll = await until(async () => {
  const p = await call(c, "process", { action: "poll", sessionId: it });
  return p.sc.output === "integration\n" ? p : null;
}, 60000);
const itKill = await call(c, "process", { action: "kill", sessionId: it });
const itEnd = await waitEnd(c, it);
check("000-R37", "Integration Tests: End-to-end: execute_command (background) → process:poll → process:kill",
  r.sc.status === "running" && itPoll?.sc.status === "running" && !itKill.isError && itEnd?.sc.status === "killed", { start: r.sc, kill: itKill.text, end: itEnd?.sc });
r = await call(c, "process", { action: "log", sessionId: "nosuchsession" });
const term = await call(c, "process", { action: "write", sessionId: it, data: "x" });
check("000-R38", "Integration Tests: Error scenarios: Invalid sessionId, terminated process",
  r.isError && r.text.includes("Session nosuchsession not found") && term.isError && term.text.includes(`Session ${it} is not running`), [r.text, term.text]);

// --- Session Isolation -------------------------------------------------------------------------------
// Two conversations: two servers given no scope of their own.
const convA = await connect("", { JOBS_SCOPE: "" });
const convB = await connect("", { JOBS_SCOPE: "" });
r = await call(convA, "execute_command", { command: "sleep 300", background: true, description: "conversation A" });
const aId = r.sc.sessionId;
const seenB = await call(convB, "process", { action: "poll", sessionId: aId });
const listB = await call(convB, "process", { action: "list" });
const killB = await call(convB, "process", { action: "kill", sessionId: aId });
check("000-R39", "Security: Session Isolation: Map key is conversationId, prevents cross-agent access",
  seenB.isError && seenB.text.includes(`Session ${aId} not found`) && !(listB.sc.sessions || []).some((s) => s.sessionId === aId) &&
    killB.isError && (await call(convA, "process", { action: "poll", sessionId: aId })).sc.status === "running",
  { poll: seenB.text, list: listB.sc, kill: killB.text });
await call(convA, "process", { action: "kill", sessionId: aId });
await convA.close();
await convB.close();

// --- Resource Limits: TTL cleanup ------------------------------------------------------------------------
const ttl = await connect("", { PI_BASH_JOB_TTL_MS: "1000" });
r = await call(ttl, "execute_command", { command: "seq 1 4000", description: "expires soon" });
const exp = r.sc.sessionId;
const expFile = (await call(ttl, "process", { action: "poll", sessionId: exp })).sc.outputFilePath;
const expired = await until(async () => {
  spawnSync(bin, ["gc"], { env: process.env });
  const p = await call(ttl, "process", { action: "poll", sessionId: exp });
  return p.isError && p.text.includes(`Session ${exp} not found`);
}, 60000, 1500);
check("000-R40", "Resource Limits: TTL cleanup prevents resource exhaustion (cleanup timer: Verify TTL expiration; its offloaded file too)",
  expired && expFile && !fs.existsSync(expFile), { expired, expFile });
await ttl.close();

// --- Migration Notes ---------------------------------------------------------------------------------------
r = await call(c, "execute_command", { command: "echo foreground", description: "plain command" });
ids.push(r.sc.sessionId);
check("000-R41", "Migration Notes: No breaking changes to existing execute_command; New parameters are optional with sensible defaults",
  r.sc.status === "done" && r.sc.exitCode === 0 && r.sc.output === "foreground\n", r.sc);
check("000-R42", "Migration Notes: process tool is additive only (execute_command still there beside it)", byName.execute_command && byName.process && !eq(byName.execute_command, {}), Object.keys(byName));

for (const id of ids) if (id) await call(c, "process", { action: "kill", sessionId: id });
await c.close();
done();
