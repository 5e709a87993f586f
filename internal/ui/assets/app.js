// The pages' live parts. Everything inserted here is HTML that the server
// rendered with its text escaped, or text set with textContent.
"use strict";
(function () {
  const body = document.body;
  const base = body.dataset.base;
  const token = body.dataset.token;
  const live = document.getElementById("live");

  function follow(url, handlers) {
    const es = new EventSource(url);
    es.addEventListener("hello", () => live && live.classList.add("on"));
    es.onerror = () => live && live.classList.remove("on");
    for (const [name, fn] of Object.entries(handlers)) {
      es.addEventListener(name, (e) => fn(e.data, es));
    }
    es.addEventListener("failure", (e) => {
      if (live) live.title = e.data;
    });
    return es;
  }

  const stream = body.dataset.stream;
  const rows = document.getElementById("rows");
  const log = document.getElementById("log");
  const charts = document.getElementById("charts");
  if (stream && rows) {
    follow(stream, { rows: (html) => { rows.innerHTML = html; } });
  }
  if (stream && charts) {
    follow(stream, { charts: (html) => { charts.innerHTML = html; } });
  }
  if (log) {
    // A link to a line (#L123) shows that line; the live end shows the
    // newest output; a page by offset or line starts at its top.
    // A jump by the line form names no fragment: add it, so the line is
    // marked (:target) and the address links to it.
    if (!location.hash && log.dataset.line && document.getElementById("L" + log.dataset.line)) {
      location.replace("#L" + log.dataset.line);
    }
    const target = location.hash && document.getElementById(location.hash.slice(1));
    if (target) {
      target.scrollIntoView({ block: "center" });
    } else if (log.classList.contains("follow")) {
      log.scrollTop = log.scrollHeight;
    }
  }
  if (stream && log) {
    const meta = document.getElementById("meta");
    const status = document.getElementById("status");
    const range = document.getElementById("range");
    follow(stream, {
      out: (html) => {
        const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        log.insertAdjacentHTML("beforeend", html);
        if (atEnd) log.scrollTop = log.scrollHeight;
      },
      meta: (html) => {
        meta.innerHTML = html;
        const s = document.getElementById("meta-status");
        if (s && status) {
          status.textContent = s.textContent;
          status.className = s.className;
          status.id = "status";
        }
      },
      end: (_, es) => {
        es.close();
        if (live) live.classList.remove("on");
        if (range) range.append(" (the job has ended)");
      },
    });
  }

  const control = document.getElementById("control");
  if (control) {
    const job = control.dataset.job;
    const scope = control.dataset.scope || "";
    const result = document.getElementById("control-result");
    async function act(verb, fields) {
      result.textContent = "…";
      try {
        const r = await fetch(base + "/job/" + encodeURIComponent(job) + "/" + verb + scope, {
          method: "POST",
          headers: { "X-Jobs-Token": token },
          body: new URLSearchParams(fields),
          credentials: "same-origin",
        });
        const text = await r.text();
        if (!r.ok) { result.textContent = text.trim(); return; }
        const answer = JSON.parse(text);
        result.textContent = answer.message;
        if (verb === "restart" && answer.result && answer.result.id) {
          // The new job is the one to follow now.
          location.href = base + "/job/" + encodeURIComponent(answer.result.id) + scope;
        }
      } catch (e) {
        result.textContent = String(e);
      }
    }
    document.getElementById("kill").addEventListener("click", () => act("kill", {}));
    document.getElementById("restart").addEventListener("click", () => act("restart", {}));
    document.getElementById("send-signal").addEventListener("click", () =>
      act("signal", { signal: document.getElementById("signal").value }));
    document.getElementById("send-stdin").addEventListener("click", () => {
      const input = document.getElementById("stdin");
      act("stdin", { data: input.value + "\n" });
      input.value = "";
    });
    document.getElementById("send-eof").addEventListener("click", () => act("stdin", { eof: "1" }));
  }
})();
