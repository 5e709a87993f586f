// Checks of `jobs mcp` answers through the official TypeScript SDK client,
// one group at a time, printing one JSON line per check:
// { group, check, ok, error, ...measures }, and a last line
// { group, done: true }.
//
//   node checks.mjs /path/to/jobs GROUP
//
// Groups: pty (the pty mode and merge through execute_command and
// process), wire (protocol answers: versions, levels, errors, the poll
// hint, a cancelled call, the size of tools/list).
// The environment is passed on to `jobs mcp` (JOBS_DB, XDG_*, JOBS_SCOPE).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, group] = process.argv.slice(2);
if (!bin || !group) {
  console.error("usage: node checks.mjs /path/to/jobs GROUP");
  process.exit(2);
}

async function connect(profile, env = {}) {
  const client = new Client({ name: "jobs-checks", version: "1.0.0" });
  const args = ["mcp"];
  if (profile) args.push("--profile", profile);
  await client.connect(new StdioClientTransport({ command: bin, args, env: { ...process.env, ...env }, stderr: "inherit" }));
  return client;
}

// call returns the structured result (or the parsed text), the text, and
// isError.
async function call(client, name, args, opts) {
  const res = await client.callTool({ name, arguments: args }, undefined, opts);
  const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  let sc = res.structuredContent;
  if (!sc) {
    try { sc = JSON.parse(text); } catch { sc = {}; }
  }
  return { sc, text, isError: !!res.isError };
}

function check(name, cond, detail, extra = {}) {
  const line = { group, check: name, ok: !!cond, ...extra };
  if (!cond) line.error = typeof detail === "string" ? detail : JSON.stringify(detail);
  console.log(JSON.stringify(line));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const terminal = (st) => ["done", "error", "killed"].includes(st);

// waitEnd waits for a job to end, a call at a time.
async function waitEnd(c, id) {
  let r;
  for (let i = 0; i < 20; i++) {
    r = await call(c, "process", { action: "wait", sessionId: id, timeout: 20 });
    if (terminal(r.sc.status)) return r;
  }
  throw new Error(`${id} never ended: ${r.text}`);
}

async function pty() {
  const c = await connect();
  const { tools } = await c.listTools();
  const exec = tools.find((t) => t.name === "execute_command");
  check("execute_command takes pty and merge", exec?.inputSchema?.properties?.pty && exec?.inputSchema?.properties?.merge, exec?.inputSchema);

  // A dev server with no -u and no PYTHONUNBUFFERED: on a terminal, its
  // ready line shows at once.
  let r = await call(c, "execute_command", { command: "python3 -m http.server 0 --bind 127.0.0.1", background: true, pty: true, env: { PYTHONUNBUFFERED: "" } });
  const server = r.sc.sessionId;
  let t0 = Date.now();
  let w = await call(c, "process", { action: "wait", sessionId: server, until: "Serving HTTP", timeout: 30 });
  const port = /port (\d+)/.exec(w.text)?.[1];
  check("pty: wait until Serving HTTP matches", w.sc.wait_reason === "matched" && port, w.text, { ms: Date.now() - t0, chars: w.text.length });
  if (port) {
    const res = await fetch(`http://127.0.0.1:${port}/`);
    check("pty: the server answers on the port it printed", res.ok, res.status);
  }
  r = await call(c, "process", { action: "kill", sessionId: server });
  check("pty: kill ends the server", r.sc.status === "killed", r.text);

  // The contrast: the same program into a pipe holds its line back.
  const buffered = `python3 -c "import time; print('ready on 8000'); time.sleep(30)"`;
  r = await call(c, "execute_command", { command: buffered, background: true, env: { PYTHONUNBUFFERED: "" } });
  const piped = r.sc.sessionId;
  w = await call(c, "process", { action: "wait", sessionId: piped, until: "ready on", timeout: 3 });
  check("pipe: a block-buffered ready line does not show", w.sc.wait_reason !== "matched", w.text);
  await call(c, "process", { action: "kill", sessionId: piped });
  r = await call(c, "execute_command", { command: buffered, background: true, pty: true, env: { PYTHONUNBUFFERED: "" } });
  const term = r.sc.sessionId;
  t0 = Date.now();
  w = await call(c, "process", { action: "wait", sessionId: term, until: "ready on", timeout: 30 });
  check("pty: the same ready line shows", w.sc.wait_reason === "matched", w.text, { ms: Date.now() - t0 });
  await call(c, "process", { action: "kill", sessionId: term });

  // A coloured ready line on a terminal matches as the model reads it.
  r = await call(c, "execute_command", { command: `sleep 0.3; printf '\\033[32mServer\\033[0m ready on :8080\\n'; sleep 30`, background: true, pty: true });
  const coloured = r.sc.sessionId;
  w = await call(c, "process", { action: "wait", sessionId: coloured, until: "Server ready on :8080", timeout: 30 });
  check("pty: a coloured ready line matches, shown plain", w.sc.wait_reason === "matched" && w.text.includes("Server ready on :8080") && !w.text.includes("\x1b"), w.text);
  await call(c, "process", { action: "kill", sessionId: coloured });

  // A prompt: the call returns at it, waiting for input; write answers.
  r = await call(c, "execute_command", { command: `sleep 0.3; printf 'name? '; read x; echo "hi $x"; exit 3`, pty: true, yieldMs: 20000 });
  const prompt = r.sc.sessionId;
  let waiting = r.sc.waiting_for_input;
  for (let i = 0; i < 20 && !waiting && !terminal(r.sc.status); i++) {
    await sleep(250);
    r = await call(c, "process", { action: "poll", sessionId: prompt });
    waiting = r.sc.waiting_for_input;
  }
  check("pty: waiting_for_input at the prompt", waiting && r.text.includes("name?"), r.text);
  r = await call(c, "process", { action: "write", sessionId: prompt, data: "bob\n" });
  check("pty: write", !r.isError, r.text);
  r = await waitEnd(c, prompt);
  check("pty: the answer is read and the exit code recorded", r.text.includes("hi bob") && r.sc.exitCode === 3 && r.sc.status === "error", r.text);

  // send_keys: text, a key name, then C-d for end of file.
  r = await call(c, "execute_command", { command: `cat; echo "cat ended"`, background: true, pty: true });
  const cat = r.sc.sessionId;
  r = await call(c, "process", { action: "send_keys", sessionId: cat, keys: ["hello", "Enter", "C-d"] });
  check("pty: send_keys", !r.isError, r.text);
  r = await waitEnd(c, cat);
  check("pty: keys reach the program, C-d ends its input", r.sc.status === "done" && r.text.includes("hello") && r.text.includes("cat ended"), r.text);

  // kill ends the whole tree: the processes it forked are gone.
  r = await call(c, "execute_command", { command: `sleep 300 & sleep 300 & echo forked; wait`, background: true, pty: true });
  const tree = r.sc.sessionId;
  await call(c, "process", { action: "wait", sessionId: tree, until: "forked", timeout: 30 });
  r = await call(c, "process", { action: "kill", sessionId: tree });
  check("pty: kill ends the tree", r.sc.status === "killed", r.text);
  const st = await call(c, "process", { action: "status", sessionId: tree });
  check("pty: nothing of the tree is left", st.sc.session?.status === "killed" && (st.sc.session?.descendants ?? 0) === 0, st.text);

  // merge: stdout and stderr in the order written.
  r = await call(c, "execute_command", { command: `for i in 1 2 3 4 5; do echo out$i; echo err$i >&2; done`, merge: true });
  const want = [1, 2, 3, 4, 5].map((i) => `out${i}\nerr${i}`).join("\n");
  check("merge: one stream in order", r.text.includes(want), r.text);

  await c.close();
}

// toolsChars is the size of a profile's tools/list as the model is given
// it: names, descriptions and input schemas.
async function toolsChars(profile) {
  const c = await connect(profile);
  const { tools } = await c.listTools();
  await c.close();
  return JSON.stringify(tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }))).length;
}

// wireCode runs a request and returns the JSON-RPC error code it was
// answered with, or "ok".
async function wireCode(fn) {
  try {
    await fn();
    return "ok";
  } catch (e) {
    return e.code;
  }
}

async function wire() {
  const c = await connect();
  const ver = c.getServerVersion()?.version;
  check("serverInfo.version is a version", ver && ver !== "(devel)" && /^v?\d+\.\d+\.\d+/.test(ver), ver, { version: ver });

  let code = await wireCode(() => c.setLoggingLevel("verbose"));
  check("logging/setLevel refuses an unknown level (invalid params)", code === -32602, code);
  code = await wireCode(() => c.setLoggingLevel("info"));
  check("logging/setLevel takes info", code === "ok", code);

  code = await wireCode(() => c.subscribeResource({ uri: "file:///etc/passwd" }));
  check("resources/subscribe on a foreign URI: invalid params", code === -32602, code);
  code = await wireCode(() => c.subscribeResource({ uri: "jobs://nosuchjob000" }));
  check("resources/subscribe on an unknown job: resource not found", code === -32002, code);
  code = await wireCode(() => c.readResource({ uri: "jobs://nosuchjob000" }));
  check("resources/read of an unknown job: -32002", code === -32002, code);
  code = await wireCode(() => c.readResource({ uri: "file:///etc/passwd" }));
  check("resources/read of a foreign URI: -32002", code === -32002, code);

  // The poll hint while output flows: it stays short.
  let r = await call(c, "execute_command", { command: `i=0; while [ $i -lt 400 ]; do echo line $i; i=$((i+1)); sleep 0.1; done`, background: true });
  const chatty = r.sc.sessionId;
  // An agent that polls a job whose output flows, once a second or so.
  // Five polls that found new output, however many it takes: on a
  // starved core some polls come before the next write is stored. A poll
  // that finds new output has seen the job change, so its hint must not
  // have grown from polls that saw nothing: at most half the job's quiet
  // time (vocab.RetryIn), which is at most the time since the poll before
  // began (the new output came after that poll read; the row it is read
  // from may lag by a second), and 2 s at least.
  // On an idle machine that is 1 s; a starved job that printed nothing
  // for seconds gets a longer hint, rightly.
  const hints = [], bounds = [];
  let polls = 0, prevStart = Date.now();
  for (; polls < 30 && hints.length < 5; polls++) {
    await sleep(1000);
    const start = Date.now();
    r = await call(c, "process", { action: "poll", sessionId: chatty });
    if (r.sc.new_output) {
      hints.push(r.sc.retry_in_ms);
      bounds.push(Math.max(2000, Math.ceil((Date.now() - prevStart) / 2) + 1000));
    }
    prevStart = start;
  }
  check("poll hint stays short while output flows", hints.length >= 5 && hints.every((h, i) => h <= bounds[i]), { hints, bounds, polls }, { hints, bounds, polls });
  await call(c, "process", { action: "kill", sessionId: chatty });

  // A cancelled foreground execute_command: the job it started goes, and
  // the log says which it was.
  const notices = [];
  c.setNotificationHandler((await import("@modelcontextprotocol/sdk/types.js")).LoggingMessageNotificationSchema, (n) => notices.push(String(n.params.data)));
  const ac = new AbortController();
  const tag = "cancelme-" + Date.now();
  const pending = call(c, "execute_command", { command: `echo ${tag}; sleep 120`, yieldMs: 50000 }, { signal: ac.signal }).catch((e) => e);
  let id;
  for (let i = 0; i < 100 && !id; i++) {
    await sleep(200);
    const l = await call(c, "process", { action: "list" });
    id = (l.sc.sessions || []).find((s) => (s.command || "").includes(tag))?.sessionId;
  }
  ac.abort();
  // What the call gave: an abort error, or (when it had already returned)
  // its answer, which a failure below shows.
  const answered = await pending;
  const how = answered instanceof Error ? "aborted: " + answered.message : "answered before the abort: " + (answered?.text || "").slice(0, 300);
  // Deadlines a loaded machine meets: the kill, then the notice the
  // server sends once its kill has returned.
  let st;
  for (const until = Date.now() + 60000; Date.now() < until; ) {
    st = await call(c, "process", { action: "status", sessionId: id });
    if (terminal(st.sc.session?.status)) break;
    await sleep(200);
  }
  check("a cancelled foreground execute_command kills its job", st.sc.session?.status === "killed", st.text + " (the call: " + how + ")");
  for (const until = Date.now() + 30000; Date.now() < until && !notices.some((m) => m.includes(id) && m.includes("cancelled")); ) await sleep(100);
  check("the log notice names the cancelled session", notices.some((m) => m.includes(id) && m.includes("cancelled")), notices);
  await c.close();

  for (const p of ["openclaw", "claude-code", "duragent", "macos-shell"]) {
    const n = await toolsChars(p);
    // OpenClaw's tools are what an agent carries in every request: held
    // to what the model needs (10.7 K characters before they were cut).
    const most = p === "openclaw" ? 7000 : Infinity;
    check(`tools/list ${p}: characters`, n > 0 && n <= most, n, { profile: p, chars: n });
  }
}

const groups = { pty, wire };
if (!groups[group]) {
  console.error(`unknown group ${group}`);
  process.exit(2);
}
try {
  await groups[group]();
} catch (e) {
  check("ran to the end", false, String(e.stack || e));
}
console.log(JSON.stringify({ group, done: true }));
process.exit(0);
