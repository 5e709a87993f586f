// Shared plumbing of the conformance suites: one suite per seed document,
// written from the document, each requirement a named check. A suite
// connects to `jobs mcp --profile NAME` through the official TypeScript SDK
// client, exactly as an agent written against the document would, and
// prints one JSON line per check: { suite, id, requirement, ok, error }.
// A last line { suite, done: true } says it ran to the end.
//
//   node conformance/NNN-profile.mjs /path/to/jobs
//
// The environment is passed on to `jobs mcp` (JOBS_DB, XDG_*, JOBS_SCOPE).
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

export const bin = process.argv[2];
if (!bin) {
  console.error("usage: node conformance/SUITE.mjs /path/to/jobs");
  process.exit(2);
}

let suiteName = "";
let failed = 0;

// suite names the document this run checks.
export function suite(name) {
  suiteName = name;
}

// connect opens a client session on `jobs mcp --profile profile` (no
// --profile when profile is empty), with env added to the environment.
export async function connect(profile, env = {}) {
  const client = new Client({ name: "jobs-conformance", version: "1.0.0" });
  const args = ["mcp"];
  if (profile) args.push("--profile", profile);
  const transport = new StdioClientTransport({ command: bin, args, env: { ...process.env, ...env }, stderr: "inherit" });
  await client.connect(transport);
  return client;
}

// call runs one tool call as the document's agent would and returns the
// structured result (or the text parsed as JSON), the text, and isError.
export async function call(client, name, args, options) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  const text = (res.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  let sc = res.structuredContent;
  if (!sc) {
    try {
      sc = JSON.parse(text);
    } catch {
      sc = {};
    }
  }
  return { sc, text, isError: !!res.isError, res };
}

// check records one requirement: id is the document's row (e.g. "004-R7"),
// requirement what the document says, in its words.
export function check(id, requirement, cond, detail) {
  const line = { suite: suiteName, id, requirement, ok: !!cond };
  if (!cond) {
    failed++;
    line.error = typeof detail === "string" ? detail : JSON.stringify(detail);
    if (line.error && line.error.length > 1500) line.error = line.error.slice(0, 1500) + "…";
  }
  console.log(JSON.stringify(line));
}

// done prints the last line and exits: 0 when every check held.
export function done() {
  console.log(JSON.stringify({ suite: suiteName, done: true }));
  process.exit(failed ? 1 : 0);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// until calls fn until it returns a truthy value or deadlineMs passes (a
// deadline for a slow machine, not a timing assertion); it returns the
// last value.
export async function until(fn, deadlineMs = 60000, everyMs = 100) {
  const end = Date.now() + deadlineMs;
  let v;
  for (;;) {
    v = await fn();
    if (v || Date.now() > end) return v;
    await sleep(everyMs);
  }
}

export const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// waitSessionEnd polls an OpenClaw session (process action=poll) until it
// no longer runs, with a deadline for a slow machine, and returns the poll.
export async function waitSessionEnd(client, id) {
  return until(async () => {
    const r = await call(client, "process", { action: "poll", sessionId: id });
    return r.sc.status && r.sc.status !== "running" ? r : null;
  }, 60000, 100);
}
