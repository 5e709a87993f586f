// Conformance of `jobs mcp` (profile openclaw, the default) to seed 001,
// "Process Tool Specification": every concrete requirement of the
// document (user stories, constraints, configuration, decisions) is a
// check, with the document's words. Written from the document, not from
// the profile's code.
//
//   node conformance/001-openclaw-spec.mjs /path/to/jobs
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import { bin, call, check, connect, done, suite, until, waitSessionEnd } from "./lib.mjs";

suite("001-openclaw-spec");

const c = await connect("");
const ids = [];

const waitEnd = waitSessionEnd;

async function run(client, args) {
  const r = await call(client, "execute_command", { description: "conformance run", ...args });
  ids.push(r.sc.sessionId);
  return r;
}

// --- US-1: Start Background Command ----------------------------------------------
let r = await run(c, { command: "echo begun; sleep 300", background: true });
const bg = r.sc.sessionId;
check("001-R1", "US-1: Agent can execute `execute_command` with `background: true` parameter", !r.isError, r.text);
check("001-R2", 'US-1: Command returns immediately with a `sessionId` and `status: "running"`', r.sc.status === "running" && typeof bg === "string" && bg.length > 0, r.sc);
const alive = await until(async () => {
  const p = await call(c, "process", { action: "poll", sessionId: bg });
  return p.sc.output === "begun\n" && p.sc.status === "running" ? p : null;
}, 60000);
check("001-R3", "US-1: Process continues running after tool returns", alive, alive?.sc);

// --- US-2: Monitor Background Output ------------------------------------------------
r = await run(c, { command: "i=0; while [ $i -lt 200 ]; do i=$((i+1)); echo \"row $i of the output\"; done" });
const rows = Array.from({ length: 200 }, (_, i) => `row ${i + 1} of the output\n`).join("");
const poll1 = await call(c, "process", { action: "poll", sessionId: r.sc.sessionId });
check("001-R4", '`process` tool with `action: "poll"` returns recent output', poll1.sc.output?.endsWith("row 200 of the output\n"), poll1.sc);
const poll2 = await call(c, "process", { action: "poll", sessionId: r.sc.sessionId });
check("001-R5", "US-2: Output is truncated to last N characters (configurable, default 500)",
  poll1.sc.output === rows.slice(-500) && poll2.sc.output === rows.slice(-500), { first: poll1.sc.output?.length, second: poll2.sc.output?.length });
const fail = await run(c, { command: "echo no >&2; exit 2" });
const killed = await run(c, { command: "sleep 300", background: true });
await call(c, "process", { action: "kill", sessionId: killed.sc.sessionId });
const words = [
  (await call(c, "process", { action: "poll", sessionId: bg })).sc.status,
  poll1.sc.status,
  (await call(c, "process", { action: "poll", sessionId: fail.sc.sessionId })).sc.status,
  (await waitEnd(c, killed.sc.sessionId))?.sc.status,
];
check("001-R6", 'US-2: Returns current status: "running", "done", "error", or "killed"', words.join() === "running,done,error,killed", words);

// --- US-3: Read Full Output ------------------------------------------------------------
r = await call(c, "process", { action: "log", sessionId: poll1.sc.sessionId, offset: 10, limit: 25 });
const r2 = await call(c, "process", { action: "log", sessionId: poll1.sc.sessionId, offset: 35, limit: 25 });
check("001-R7", '`process` tool with `action: "log"` supports pagination via `offset` and `limit`',
  r.sc.output === rows.slice(10, 35) && r2.sc.output === rows.slice(35, 60), [r.sc.output, r2.sc.output]);
r = await run(c, { command: "seq 1 5000" }); // 23893 bytes, past 10KB
const large = r.sc.sessionId;
const lp = await call(c, "process", { action: "poll", sessionId: large });
const seq5000 = Array.from({ length: 5000 }, (_, i) => `${i + 1}\n`).join("");
check("001-R8", "US-3: Large outputs are automatically offloaded to files", lp.sc.offloaded === true && typeof lp.sc.outputFilePath === "string", lp.sc);
let fileText = "";
try {
  fileText = fs.readFileSync(lp.sc.outputFilePath, "utf8");
} catch (e) {
  fileText = String(e);
}
check("001-R9", "US-3: Agent can use file tools to read offloaded content", fileText === seq5000, { path: lp.sc.outputFilePath, length: fileText.length });

// --- US-4: Send Input to Background Process -------------------------------------------------
r = await run(c, { command: "while read l; do echo \"got $l\"; done; echo closed", background: true });
const rd = r.sc.sessionId;
r = await call(c, "process", { action: "write", sessionId: rd, data: "one\n" });
const got = await until(async () => (await call(c, "process", { action: "poll", sessionId: rd })).sc.output === "got one\n", 60000);
check("001-R10", '`process` tool with `action: "write"` sends data to stdin', !r.isError && got, r.text);
r = await call(c, "process", { action: "write", sessionId: rd, data: "two\n", eof: true });
const rdEnd = await waitEnd(c, rd);
check("001-R11", "US-4: Optional `eof: true` closes stdin", !r.isError && rdEnd?.sc.status === "done" && rdEnd?.sc.output === "got one\ngot two\nclosed\n", rdEnd?.sc);

// --- US-5: Manage Background Sessions ------------------------------------------------------------
r = await call(c, "process", { action: "list" });
const listed = (r.sc.sessions || []).map((s) => s.sessionId);
check("001-R12", '`action: "list"` shows all sessions for current agent', ids.filter(Boolean).every((id) => listed.includes(id)), { ids, listed });
r = await call(c, "process", { action: "kill", sessionId: bg });
const bgEnd = await waitEnd(c, bg);
check("001-R13", '`action: "kill"` terminates a running session', !r.isError && bgEnd?.sc.status === "killed", bgEnd?.sc);
r = await call(c, "process", { action: "clear", sessionId: large });
const afterClear = await call(c, "process", { action: "poll", sessionId: large });
const clearedFile = fs.existsSync(lp.sc.outputFilePath) ? fs.readFileSync(lp.sc.outputFilePath, "utf8") : "(missing)";
check("001-R14", '`action: "clear"` clears output buffer/file', !r.isError && afterClear.sc.output === "" && clearedFile === "", { poll: afterClear.sc, file: clearedFile.length });
r = await call(c, "process", { action: "remove", sessionId: large });
const afterRemove = await call(c, "process", { action: "poll", sessionId: large });
const listAfter = (await call(c, "process", { action: "list" })).sc.sessions || [];
check("001-R15", '`action: "remove"` completely removes a session',
  !r.isError && afterRemove.isError && !listAfter.some((s) => s.sessionId === large) && !fs.existsSync(lp.sc.outputFilePath), afterRemove.text);

// --- Constraints: Security -----------------------------------------------------------------------
const a = await connect("", { JOBS_SCOPE: "" });
const b = await connect("", { JOBS_SCOPE: "" });
r = await call(a, "execute_command", { command: "sleep 300", background: true, description: "agent A's session" });
const aId = r.sc.sessionId;
const bPoll = await call(b, "process", { action: "poll", sessionId: aId });
const bList = (await call(b, "process", { action: "list" })).sc.sessions || [];
const bWrite = await call(b, "process", { action: "write", sessionId: aId, data: "x" });
const bRemove = await call(b, "process", { action: "remove", sessionId: aId });
check("001-R16", "Security: Sessions are isolated by `conversationId` (agent-scoped)",
  bPoll.isError && !bList.some((s) => s.sessionId === aId) && (await call(a, "process", { action: "poll", sessionId: aId })).sc.status === "running",
  { poll: bPoll.text, list: bList });
check("001-R17", "Security: No cross-agent session access", bWrite.isError && bRemove.isError && bWrite.text.includes(`Session ${aId} not found`), [bWrite.text, bRemove.text]);
await call(a, "process", { action: "kill", sessionId: aId });
await a.close();
await b.close();
const many = [];
for (let i = 0; i < 5; i++) many.push((await run(c, { command: "true", background: true })).sc.sessionId);
check("001-R18", "Security: Session IDs are cryptographically random (nanoid)",
  new Set(many).size === many.length && many.every((id) => typeof id === "string" && id.length >= 12 && /^[A-Za-z0-9_-]+$/.test(id)), many);

// --- Constraints: Resource Management ----------------------------------------------------------------
r = await call(c, "process", { action: "status", sessionId: killed.sc.sessionId });
check("001-R19", "Resource Management: Maximum runtime limit (default 30 minutes)", r.sc.session?.timeout_ms === 1800000, r.sc.session);
r = await run(c, { command: "sleep 300", timeout: 1000, background: true });
const capped = await waitEnd(c, r.sc.sessionId);
check("001-R20", "Resource Management: Maximum runtime limit: a command is ended after it", capped?.sc.status === "killed", capped?.sc);
r = await run(c, { command: "head -c 10240 /dev/zero | tr '\\0' x" });
const atLimit = await call(c, "process", { action: "poll", sessionId: r.sc.sessionId });
r = await run(c, { command: "head -c 10241 /dev/zero | tr '\\0' x" });
const past = await call(c, "process", { action: "poll", sessionId: r.sc.sessionId });
check("001-R21", "Resource Management: Large outputs offloaded to files (>10KB threshold)",
  atLimit.sc.offloaded === false && past.sc.offloaded === true, { at: atLimit.sc.offloaded, past: past.sc.offloaded });
// Automatic TTL cleanup: PI_BASH_JOB_TTL_MS shortens it; the janitor (jobs gc runs it now) deletes the session.
const ttl = await connect("", { PI_BASH_JOB_TTL_MS: "1000" });
r = await call(ttl, "execute_command", { command: "echo short-lived", description: "expires soon" });
const exp = r.sc.sessionId;
const expired = await until(async () => {
  spawnSync(bin, ["gc"], { env: process.env });
  const p = await call(ttl, "process", { action: "poll", sessionId: exp });
  return p.isError && p.text.includes(`Session ${exp} not found`);
}, 60000, 1500);
check("001-R22", "Resource Management: Automatic TTL cleanup (PI_BASH_JOB_TTL_MS / cleanupMs: session TTL)", expired, exp);
await ttl.close();

// --- Configuration: defaults and environment variables ------------------------------------------------
r = await run(c, { command: "sleep 1; echo waited" });
check("001-R23", "Configuration: backgroundMs: Default yield window (10000): a command of a second returns its result",
  r.sc.status === "done" && r.sc.output === "waited\n", r.sc);
r = await run(c, { command: "sleep 300", yieldMs: 300 });
check("001-R24", "Configuration: the yield window (yieldMs): a command longer than it returns running with its sessionId", r.sc.status === "running" && r.sc.sessionId, r.sc);
await call(c, "process", { action: "kill", sessionId: r.sc.sessionId });
check("001-R25", "Configuration: timeoutSec: Max runtime (1800)", (await call(c, "process", { action: "status", sessionId: bg })).sc.session?.timeout_ms === 1800 * 1000, bg);
check("001-R26", "Configuration: maxOutputChars: Poll output limit (500)", poll1.sc.output?.length === 500, poll1.sc.output?.length);
const envChecks = {};
for (const [name, value] of [["PI_BASH_MAX_OUTPUT_CHARS", "100"], ["OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS", "120"]]) {
  const e = await connect("", { [name]: value });
  const rr = await call(e, "execute_command", { command: "seq 1 300", description: "three hundred lines" });
  ids.push(rr.sc.sessionId);
  const p = await call(e, "process", { action: "poll", sessionId: rr.sc.sessionId });
  const seq300 = Array.from({ length: 300 }, (_, i) => `${i + 1}\n`).join("");
  envChecks[name] = p.sc.output === seq300.slice(-Number(value));
  await e.close();
}
{
  const e = await connect("", { PI_BASH_YIELD_MS: "200" });
  const rr = await call(e, "execute_command", { command: "sleep 300", description: "window from the environment" });
  envChecks.PI_BASH_YIELD_MS = rr.sc.status === "running";
  await call(e, "process", { action: "kill", sessionId: rr.sc.sessionId });
  await e.close();
}
{
  const e = await connect("", { PI_BASH_MAX_OUTPUT_CHARS: "100", OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS: "120" });
  const rr = await call(e, "execute_command", { command: "seq 1 300", description: "three hundred lines" });
  ids.push(rr.sc.sessionId);
  envChecks.precedence = (await call(e, "process", { action: "poll", sessionId: rr.sc.sessionId })).sc.output?.length === 100;
  await e.close();
}
envChecks.PI_BASH_JOB_TTL_MS = expired;
check("001-R27", "Environment variables: PI_BASH_YIELD_MS, PI_BASH_MAX_OUTPUT_CHARS, OPENCLAW_BASH_PENDING_MAX_OUTPUT_CHARS (compatibility), PI_BASH_JOB_TTL_MS",
  Object.values(envChecks).every(Boolean) && Object.keys(envChecks).length === 5, envChecks);

// --- Non-Goals and Open Questions ------------------------------------------------------------------------
r = await run(c, { command: "if [ -t 0 ] || [ -t 1 ]; then echo tty; else echo pipe; fi" });
check("001-R28", "Open Questions: PTY or pipe mode? → Pipe mode (agent-controlled)", r.sc.output === "pipe\n", r.sc);
const { tools } = await c.listTools();
check("001-R29", "Open Questions: Always show process tool? → Yes, always visible", tools.some((t) => t.name === "process"), tools.map((t) => t.name));
check("001-R30", "Open Questions: Default poll output size? → 500 characters", poll2.sc.output?.length === 500, poll2.sc.output?.length);
check("001-R31", "Open Questions: Offload large outputs? → Yes, >10KB threshold", atLimit.sc.offloaded === false && past.sc.offloaded === true && fileText === seq5000, null);

for (const id of ids) if (id) await call(c, "process", { action: "kill", sessionId: id });
await c.close();
done();
