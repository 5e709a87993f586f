// Drives `jobs mcp` through the official TypeScript SDK client, one client
// session per scenario, the way an agent would: the fewest calls the
// server's tools allow, with the client's default request timeout (60 s).
// For each scenario it prints one JSON line: calls made, characters of
// text content returned to the model, characters of structured content,
// the longest call, calls that ended in a client timeout, calls that
// lasted the server's whole call bound (a slow machine needs more of
// them: the test allows one more call for each), and what the scenario
// checks.
//
//   node scenarios.mjs /path/to/jobs [scenario …]
//
// Environment: BUILD_SECONDS (default 12) is how long the failing build
// runs; the server's bound (JOBS_MCP_CALL_BOUND_MS) should be below it.
// SCENARIO_TRACE=1 prints every call and its text to stderr.
// The environment is passed on to `jobs mcp` (JOBS_DB, XDG_*, JOBS_SCOPE).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { execFileSync } from "node:child_process";

const bin = process.argv[2];
if (!bin) {
  console.error("usage: node scenarios.mjs /path/to/jobs [scenario …]");
  process.exit(2);
}
const only = process.argv.slice(3);
const buildSeconds = Number(process.env.BUILD_SECONDS || 12);
// The server's call bound: a call that lasts it out was cut by it.
const boundMs = Number(process.env.JOBS_MCP_CALL_BOUND_MS || 50000);

// session wraps one client: every call is counted and measured.
class Session {
  constructor(name) {
    this.name = name;
    this.calls = 0;
    this.chars = 0;
    this.structured = 0;
    this.timeouts = 0;
    this.longest = 0;
    this.cut = 0; // calls that lasted the whole call bound
    this.log = [];
  }
  async open() {
    this.client = new Client({ name: "jobs-scenarios", version: "1.0.0" });
    const env = { ...process.env, JOBS_SCOPE: "scenario-" + this.name };
    this.transport = new StdioClientTransport({ command: bin, args: ["mcp"], env, stderr: "inherit" });
    await this.client.connect(this.transport);
    const { tools } = await this.client.listTools();
    this.tools = new Set(tools.map((t) => t.name));
    this.annotations = Object.fromEntries(tools.map((t) => [t.name, t.annotations || {}]));
  }
  async close() {
    await this.client.close();
  }
  // call runs one tool call; a client timeout is counted and returned as
  // { timedOut: true }.
  async call(name, args) {
    this.calls++;
    const t0 = Date.now();
    let res;
    try {
      // No options: the SDK's default request timeout applies.
      res = await this.client.callTool({ name, arguments: args });
    } catch (e) {
      const ms = Date.now() - t0;
      this.longest = Math.max(this.longest, ms);
      if (String(e.message).includes("timed out") || e.code === -32001) {
        this.timeouts++;
        this.log.push({ name, args, ms, timeout: true });
        return { timedOut: true };
      }
      throw e;
    }
    const ms = Date.now() - t0;
    this.longest = Math.max(this.longest, ms);
    if (ms >= boundMs) this.cut++;
    const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text);
    this.chars += text.reduce((n, s) => n + s.length, 0);
    if (res.structuredContent) this.structured += JSON.stringify(res.structuredContent).length;
    const sc = res.structuredContent || parseJSON(text[1]) || {};
    this.log.push({ name, action: args.action, ms, isError: !!res.isError, chars: text.join("").length });
    if (process.env.SCENARIO_TRACE) {
      console.error(`--- ${this.name}: ${name} ${JSON.stringify(args).slice(0, 300)} (${ms} ms)\n${text.map((t) => t.length > 600 ? t.slice(0, 300) + " […] " + t.slice(-300) : t).join("\n[block]\n")}`);
    }
    // all is everything the result says, for checks that must hold
    // whatever the server's format.
    const all = text.join("\n") + JSON.stringify(sc);
    return { res, text: text.join("\n"), all, sc, ms, isError: !!res.isError };
  }
  // kill ends a session by the tool this server has for it.
  async kill(id) {
    if (this.tools.has("kill_process")) return this.call("kill_process", { sessionId: id });
    return this.call("process", { action: "kill", sessionId: id });
  }
  report(extra) {
    return {
      scenario: this.name,
      calls: this.calls,
      chars: this.chars,
      structured_chars: this.structured,
      longest_call_ms: this.longest,
      client_timeouts: this.timeouts,
      bound_cut_calls: this.cut,
      annotations_honest: this.annotations?.process?.destructiveHint !== false,
      ...extra,
    };
  }
}

function parseJSON(s) {
  try {
    return s ? JSON.parse(s) : null;
  } catch {
    return null;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// waitDone waits for one session to end (or, with extra.until, for its
// pattern) with the fewest calls the server allows: wait again while it
// says the job still runs, as an agent does when the server's call bound
// cut a wait short.
async function waitDone(s, id, extra = {}) {
  for (let i = 0; i < 20; i++) {
    const r = await s.call("process", { action: "wait", sessionId: id, ...extra });
    if (r.timedOut) continue;
    if (isTerminal(r.sc.status)) return r;
    if (extra.until && r.sc.wait_reason === "matched") return r;
  }
  throw new Error(`${s.name}: ${id} never ended${extra.until ? " nor matched " + extra.until : ""}`);
}

function isTerminal(st) {
  return ["done", "error", "killed"].includes(st); // OpenClaw's words
}

const scenarios = {
  // 1. A short command: one call, and the result is little more than its
  // output.
  async short(s) {
    let r = await s.call("execute_command", { command: "sleep 2; echo done" });
    if (!isTerminal(r.sc.status)) r = await waitDone(s, r.sc.sessionId); // a loaded machine
    check(r.sc.status === "done" && (r.sc.output ?? r.text).includes("done\n"), "short: not done", r.text);
    return { output: "done\n".length, text: r.text };
  },

  // 2. A build that fails after running longer than the server's call
  // bound. The agent asks to wait 90 s for it; the call must come back
  // before the client's 60 s timeout with the session id.
  async build(s) {
    const cmd = `i=0; while [ $i -lt ${buildSeconds * 4} ]; do i=$((i+1)); echo "compiling unit $i"; sleep 0.25; done; echo "error: undefined reference to main" >&2; exit 2`;
    let r = await s.call("execute_command", { command: cmd, yieldMs: 90000 });
    let id = r.sc?.sessionId;
    if (r.timedOut) {
      // The agent never got the id: find it.
      const l = await s.call("process", { action: "list" });
      id = (l.sc.sessions || []).find((x) => x.command.includes("compiling unit"))?.sessionId;
    }
    const firstStatus = r.timedOut ? "client timeout" : r.sc?.status;
    if (!isTerminal(r.sc?.status)) r = await waitDone(s, id);
    check(r.sc.status === "error" && r.sc.exitCode === 2, "build: not error with exitCode 2", r.text);
    check(r.all.includes("undefined reference"), "build: error line missing", r.text);
    return { first_status: firstStatus, runtime_ms: r.sc.runtime_ms };
  },

  // 3. A dev server: start it, wait until it is ready, kill it.
  async devserver(s) {
    const r = await s.call("execute_command", {
      command: `sleep 1; echo "server listening on http://127.0.0.1:8080"; while :; do sleep 1; done`,
      background: true,
    });
    const id = r.sc.sessionId;
    const w = await waitDone(s, id, { until: "listening on", timeout: 30 });
    check(w.sc.wait_reason === "matched", "devserver: not ready", w.text);
    const k = await s.kill(id);
    check(!k.isError, "devserver: kill failed", k.text);
    return {};
  },

  // 4. A prompt on stdin: start (returns at the prompt), answer, wait.
  async prompt(s) {
    const t0 = Date.now();
    const r = await s.call("execute_command", { command: `sleep 0.5; printf 'continue? '; read x; echo "answer: $x"` });
    const atPrompt = Date.now() - t0;
    const promptShown = r.all.includes("continue?");
    const id = r.sc.sessionId;
    const w = await s.call("process", { action: "write", sessionId: id, data: "yes\n" });
    check(!w.isError, "prompt: write failed", w.text);
    const d = await waitDone(s, id);
    check(d.sc.status === "done" && d.all.includes("answer: yes"), "prompt: no answer", d.text);
    return {
      prompt_seen_ms: atPrompt,
      waiting_for_input: !!r.sc.waiting_for_input,
      prompt_shown: promptShown,
      first_status: r.sc.status,
      first_text: r.text.slice(0, 400),
    };
  },

  // 5. 5 MB of coloured output with carriage-return progress bars and
  // text full of < > &.
  async coloured(s) {
    const awk = `awk 'BEGIN { for (i = 1; i <= 60000; i++) { printf "\\033[32mcompiling\\033[0m unit %d: std::vector<int> v; if (a && b) x = y > z;\\n", i; if (i % 600 == 0) { for (p = 0; p <= 100; p += 5) printf "\\rprogress [%-20s] %d%%", substr("####################", 1, p / 5), p; printf "\\n" } } }'`;
    let r = await s.call("execute_command", { command: awk, yieldMs: 30000 });
    const texts = [r.text];
    if (!isTerminal(r.sc.status)) {
      // A loaded machine: the call bound came first.
      r = await waitDone(s, r.sc.sessionId);
      texts.push(r.text);
    }
    check(r.sc.status === "done", "coloured: not done", r.text);
    const raw = "std::vector<int> v; if (a && b) x = y > z;";
    return {
      escaped: texts.some((t) => t.includes("\\u003c") || t.includes("\\u0026")),
      verbatim: texts.some((t) => t.includes(raw)),
      output_bytes: r.sc.output_info?.total_bytes,
    };
  },

  // 6. Three jobs in parallel; learn of each end as soon as it happens.
  async parallel(s) {
    const durations = { build: 4, lint: 1, test: 2.5 };
    const ids = {};
    const started = {};
    for (const [name, sec] of Object.entries(durations)) {
      const r = await s.call("execute_command", { command: `sleep ${sec}; echo ${name} ok`, background: true, name });
      ids[name] = r.sc.sessionId;
      started[r.sc.sessionId] = Date.now();
    }
    const lags = {};
    let pending = Object.values(ids);
    const multi = await supportsSessionIds(s);
    while (pending.length > 0) {
      if (multi) {
        const r = await s.call("process", { action: "wait", sessionIds: pending });
        if (r.timedOut) continue;
        for (const st of r.sc.sessions || [{ sessionId: r.sc.sessionId, status: r.sc.status, runtime_ms: r.sc.runtime_ms }]) {
          if (isTerminal(st.status) && pending.includes(st.sessionId)) {
            lags[st.sessionId] = Date.now() - (started[st.sessionId] + st.runtime_ms);
            pending = pending.filter((x) => x !== st.sessionId);
          }
        }
      } else {
        // One at a time, in the order started.
        const id = pending[0];
        const r = await waitDone(s, id);
        lags[id] = Date.now() - (started[id] + r.sc.runtime_ms);
        pending = pending.slice(1);
      }
    }
    const worst = Math.max(...Object.values(lags));
    return { learned_late_ms: Object.fromEntries(Object.entries(ids).map(([n, id]) => [n, lags[id]])), worst_lag_ms: worst };
  },

  // 7. A python3 REPL in tmux: start, type a line and Enter, read the
  // answer, end it.
  async repl(s) {
    if (!have("tmux") || !have("python3")) return { skipped: "tmux or python3 not installed" };
    const r = await s.call("execute_command", { command: "python3 -q", tmux: true, background: true });
    const id = r.sc.sessionId;
    let w = await s.call("process", { action: "send_keys", sessionId: id, keys: ["print(6*7)", "Enter"] });
    if (w.isError) {
      // A server that refuses text without literal=true.
      w = await s.call("process", { action: "send_keys", sessionId: id, keys: ["print(6*7)"], literal: true });
      await s.call("process", { action: "send_keys", sessionId: id, keys: ["Enter"] });
    }
    let a = await waitDone(s, id, { until: "^42$", timeout: 20 });
    if (a.sc.wait_reason !== "matched") a = await s.call("process", { action: "capture", sessionId: id });
    check(/^42\r?$/m.test(a.text) || a.sc.match === "42" || /\\n42\\n/.test(a.all), "repl: no 42", a.text);
    const p = await s.call("process", { action: "wait", sessionId: id, until: ">>> $", timeout: 3 });
    const promptMatched = p.sc.wait_reason === "matched";
    s.calls--; // the prompt check is not part of the agent's path
    s.chars -= p.text.length;
    await s.kill(id);
    return { prompt_matched: promptMatched };
  },

  // 8. A python dev server with no -u and no PYTHONUNBUFFERED, and a
  // coloured ready line: into a pipe, Python holds the line back; in a
  // terminal (pty=true, where the server offers it) it shows at once.
  async pydev(s) {
    if (!have("python3")) return { skipped: "python3 not installed" };
    const { tools } = await s.client.listTools();
    const pty = !!tools.find((t) => t.name === "execute_command")?.inputSchema?.properties?.pty;
    const command = `python3 -c 'import http.server as h; s=h.HTTPServer(("127.0.0.1",0),h.SimpleHTTPRequestHandler); print("\\033[32mServing\\033[0m HTTP on port %d" % s.server_port); s.serve_forever()'`;
    const r = await s.call("execute_command", { command, background: true, env: { PYTHONUNBUFFERED: "" }, ...(pty ? { pty: true } : {}) });
    const id = r.sc.sessionId;
    const w = await waitDone(s, id, { until: "Serving HTTP on port [0-9]+", timeout: 30 });
    await s.kill(id);
    check(w.sc.wait_reason === "matched" && /Serving HTTP on port \d+/.test(w.text) && !w.text.includes("\x1b"), "pydev: the ready line was not seen, plain", w.text);
    return {};
  },
};

async function supportsSessionIds(s) {
  const { tools } = await s.client.listTools();
  const p = tools.find((t) => t.name === "process");
  return !!p?.inputSchema?.properties?.sessionIds;
}

function have(cmd) {
  try {
    execFileSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function check(ok, msg, text) {
  if (!ok) throw new Error(`${msg}: ${String(text).slice(0, 800)}`);
}

async function runOne(name) {
  const s = new Session(name);
  await s.open();
  const t0 = Date.now();
  try {
    const extra = await scenarios[name](s);
    return s.report({ ok: true, seconds: (Date.now() - t0) / 1000, ...extra });
  } catch (e) {
    return s.report({ ok: false, error: String(e.message || e), seconds: (Date.now() - t0) / 1000, log: s.log });
  } finally {
    await s.close();
  }
}

const names = only.length ? only : Object.keys(scenarios);
// Scenarios run side by side, each in its own client session and scope.
const results = await Promise.all(names.map(runOne));
for (const r of results) console.log(JSON.stringify(r));
process.exit(results.every((r) => r.ok) ? 0 : 1);
