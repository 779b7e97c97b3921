"""The viewer's one page: HTML, CSS and plain JavaScript (no build step, no framework).

Routes are in the URL's fragment, so every view has a link: `#/` the runs, `#/run/ID?…`
a run with its samples (filters, page and the open sample in the link), `#/compare/A/B`
two runs side by side, `#/leaderboard?runs=A,B`. Every string from the store reaches
the page through `textContent` (the `el` helper), never as HTML; a running run's page
asks for its figures again every 2 s, the runs table every 5 s.
"""

from __future__ import annotations

from html import escape

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.2em 2em;color:#222}
a{color:#0645ad} table{border-collapse:collapse;margin:.5em 0} td,th{border:1px solid #ccc;padding:3px 7px;
text-align:left;vertical-align:top} th{background:#f4f4f4} .num{text-align:right;font-variant-numeric:tabular-nums}
.note{color:#666} .bad{color:#b00} .running{color:#06c;font-weight:bold} pre{white-space:pre-wrap;
word-break:break-word;max-height:24em;overflow:auto;background:#f8f8f8;padding:.5em;border:1px solid #ddd}
.differ{background:#fff3e0} input,select{margin-right:.5em} nav a{margin-right:1em} tr.pick{cursor:pointer}
tr.pick:hover{background:#eef}
"""

_JS = r"""
"use strict";
const main = document.getElementById("main");
let timer = null;
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick" || k === "onchange" || k === "oninput") e[k] = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
function num(v, d) { return v === null || v === undefined ? "-" : Number(v).toFixed(d === undefined ? 2 : d); }
function usd(v) { return v === null || v === undefined ? "-" : "$" + Number(v).toFixed(4); }
function score(v, ci) { return v === null ? "-" : num(v) + (ci ? " ±" + num((ci[1] - ci[0]) / 2) : ""); }
function link(text, href) { return el("a", {href: href}, text); }
async function get(url) {
  const r = await fetch(url, {cache: "no-store"});
  const body = await r.json().catch(() => ({error: r.statusText}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}
function route() {
  const h = location.hash.slice(1) || "/";
  const [path, query] = h.split("?");
  return {parts: path.split("/").filter(Boolean).map(decodeURIComponent), q: new URLSearchParams(query || "")};
}
function go(path, q) { location.hash = path + (q && [...q].length ? "?" + q.toString() : ""); }
function table(head, rows, cls) {
  return el("table", cls ? {class: cls} : {}, el("thead", {}, el("tr", {}, ...head.map(h => el("th", {}, h)))),
            el("tbody", {}, ...rows));
}
function show(...nodes) { main.replaceChildren(...nodes); }
function refresh(fn, ms) { clearTimeout(timer); timer = setTimeout(fn, ms); }

async function runsPage(q) {
  const runs = await get("/api/runs");
  const filter = q.get("filter") || "";
  const box = el("input", {id: "filter", placeholder: "filter: model, benchmark, status", value: filter, size: 40});
  box.onchange = () => { const n = new URLSearchParams(); if (box.value) n.set("filter", box.value); go("/", n); };
  const shown = runs.filter(r => !filter || [r.model, r.benchmark, r.status, r.run_id].join(" ").includes(filter));
  const picks = new Set();
  const cmp = el("button", {id: "compare"}, "compare two checked");
  cmp.onclick = () => { const [a, b] = [...picks]; if (a && b) go("/compare/" + a + "/" + b); };
  const board = el("button", {id: "board"}, "leaderboard of checked");
  board.onclick = () => go("/leaderboard", new URLSearchParams({runs: [...picks].join(",")}));
  const rows = shown.map(r => {
    const box = el("input", {type: "checkbox"});
    box.onchange = () => box.checked ? picks.add(r.run_id) : picks.delete(r.run_id);
    return el("tr", {"data-run": r.run_id}, el("td", {}, box), el("td", {}, link(r.run_id, "#/run/" + r.run_id)),
      el("td", {}, r.benchmark), el("td", {}, r.model), el("td", {class: r.status === "running" ? "running" : ""}, r.status),
      el("td", {class: "num"}, score(r.score, r.ci95) + (r.partial ? " (partial)" : "")),
      el("td", {class: "num"}, usd(r.cost_usd)),
      el("td", {class: "num"}, r.latency_ms ? num(r.latency_ms.p50, 0) + " / " + num(r.latency_ms.p95, 0) : "-"),
      el("td", {class: "num"}, r.invocations));
  });
  show(el("h1", {}, "Runs"), el("p", {}, box, cmp, " ", board),
       table(["", "run", "benchmark", "model", "status", "score ±95%", "USD", "latency ms p50 / p95", "invocations"], rows, "runs"),
       el("p", {class: "note"}, shown.length + " of " + runs.length + " runs"));
  refresh(() => runsPage(q), 5000);
}

function flat(obj, prefix, out) {
  for (const [k, v] of Object.entries(obj || {})) {
    const name = prefix ? prefix + " " + k : k;
    if (typeof v === "number") out.push([name, v]);
    else if (v && typeof v === "object" && !Array.isArray(v) && k !== "ci95") flat(v, name, out);
  }
  return out;
}

async function runPage(id, q) {
  const run = await get("/api/runs/" + encodeURIComponent(id));
  const L = run.live, S = run.summary;
  const status = el("p", {id: "status"}, "status: ", el("span", {class: run.status === "running" ? "running" : ""}, run.status),
    " · answered ", el("b", {id: "answered"}, L.answered), " · from cache ", el("b", {id: "cached"}, L.from_cache), " · shared ", L.shared, " · failed ", L.failed,
    " · requests ", L.requests, " · retries ", L.retries, " · 429s ", el("b", {id: "limited"}, L.rate_limited),
    " · spent ", el("b", {id: "spent"}, usd(L.usd)), " · latency ms p50 ", num(L.latency_p50_ms, 0),
    " p95 ", num(L.latency_p95_ms, 0));
  const values = S && S.scores ? flat(S.scores, "", []) : [];
  const overall = values.find(([k]) => k === "overall" || k.startsWith("overall ") || k === "estimate overall");
  const ci = S && S.scores && S.scores.ci95 ? S.scores.ci95.overall : null;
  const scores = values.length ? el("details", {id: "scores"},
    el("summary", {}, "scores" + (overall ? ": " + overall[0] + " " + score(overall[1], Array.isArray(ci) ? ci : null) : "")
       + (S.partial ? " (" + S.partial + ")" : "") + " · " + values.length + " figures (the report has them with plots)"),
    table(["score", "value"], values.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {class: "num"}, num(v))))))
    : el("p", {class: "note"}, "no scores yet");
  const task = el("select", {id: "task"}, el("option", {value: ""}, "all tasks"),
                  ...run.tasks.map(t => el("option", {value: t}, t)));
  task.value = q.get("task") || "";
  const st = el("select", {id: "status-filter"}, ...["", "answered", "from_cache", "shared", "failed", "excluded",
    "skipped_budget"].map(s => el("option", {value: s}, s || "any status")));
  st.value = q.get("status") || "";
  const search = el("input", {id: "search", placeholder: "search id, answer, references", value: q.get("q") || ""});
  const apply = () => { const n = new URLSearchParams(); if (task.value) n.set("task", task.value);
    if (st.value) n.set("status", st.value); if (search.value) n.set("q", search.value); go("/run/" + run.run_id, n); };
  task.onchange = apply; st.onchange = apply; search.onchange = apply;
  const offset = Number(q.get("offset") || 0), limit = Number(q.get("limit") || 50);
  const sq = new URLSearchParams({offset, limit});
  for (const k of ["task", "status", "q"]) if (q.get(k)) sq.set(k, q.get(k));
  const page = await get("/api/runs/" + encodeURIComponent(run.run_id) + "/samples?" + sq.toString());
  const rows = page.samples.map(s => {
    const tr = el("tr", {class: "pick", "data-sample": s.sample_id}, el("td", {}, s.task), el("td", {}, s.sample_id),
      el("td", {}, s.status), el("td", {class: "num"}, num(s.score)), el("td", {}, (s.prediction || "").slice(0, 120)),
      el("td", {class: "num"}, usd(s.usd)), el("td", {class: "num"}, num(s.latency_ms, 0)));
    tr.onclick = () => { const n = new URLSearchParams(q); n.set("sample", s.sample_id); go("/run/" + run.run_id, n); };
    return tr;
  });
  const move = (to) => () => { const n = new URLSearchParams(q); n.set("offset", Math.max(0, to)); go("/run/" + run.run_id, n); };
  const prev = el("button", {id: "prev"}, "previous"), next = el("button", {id: "next"}, "next");
  prev.onclick = move(offset - limit); next.onclick = move(offset + limit);
  prev.disabled = offset <= 0; next.disabled = offset + limit >= page.total;
  const open = q.get("sample") ? page.samples.find(s => s.sample_id === q.get("sample")) : null;
  show(el("nav", {}, link("all runs", "#/"), link("report", "/report/" + run.run_id)),
       el("h1", {}, run.benchmark + " · " + run.model), el("p", {class: "note"}, "run " + run.run_id),
       status, scores, el("h2", {}, "Samples"), el("p", {}, task, st, search),
       el("p", {id: "range"}, (page.total ? (offset + 1) + "–" + Math.min(offset + limit, page.total) : "0") + " of " + page.total,
          " ", prev, next),
       table(["task", "sample", "status", "score", "answer", "USD", "latency ms"], rows, "samples"),
       open ? sampleDetail(open) : "");
  if (run.status === "running") refresh(() => runPage(id, q), 2000); else clearTimeout(timer);
}

function sampleDetail(s) {
  const judge = s.judge ? JSON.stringify(s.judge, null, 1) : "-";
  return el("div", {id: "detail"}, el("h2", {}, "Sample " + s.sample_id),
    table(["", ""], [["status", s.status], ["score", num(s.score)], ["USD", usd(s.usd)], ["cached USD", usd(s.cached_usd)],
      ["tokens in / out", s.prompt_tokens + " / " + s.completion_tokens], ["latency ms", num(s.latency_ms, 0)],
      ["attempts", s.attempts], ["error", s.error || "-"]].map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))),
    el("h3", {}, "Answer"), el("pre", {id: "answer"}, s.prediction === null ? "(none)" : s.prediction),
    el("h3", {}, "References"), el("pre", {id: "references"}, (s.references || []).join("\n")),
    el("h3", {}, "Judge"), el("pre", {}, judge),
    el("h3", {}, "Prompt as sent"), el("pre", {id: "prompt"}, s.prompt === null ? "(not kept)" : s.prompt));
}

async function comparePage(a, b, q) {
  const offset = Number(q.get("offset") || 0), limit = 50;
  const c = await get("/api/compare?" + new URLSearchParams({a, b, offset, limit}).toString());
  const rows = c.rows.map(r => el("tr", {class: r.score_a !== r.score_b ? "differ" : ""}, el("td", {}, r.task),
    el("td", {}, r.sample_id), el("td", {class: "num"}, num(r.score_a)), el("td", {class: "num"}, num(r.score_b)),
    el("td", {}, el("pre", {}, r.prediction_a || "")), el("td", {}, el("pre", {}, r.prediction_b || ""))));
  const move = (to) => () => go("/compare/" + a + "/" + b, new URLSearchParams({offset: Math.max(0, to)}));
  const prev = el("button", {}, "previous"), next = el("button", {}, "next");
  prev.onclick = move(offset - limit); next.onclick = move(offset + limit);
  prev.disabled = offset <= 0; next.disabled = offset + limit >= c.shared;
  show(el("nav", {}, link("all runs", "#/")), el("h1", {}, "Side by side"),
       el("p", {id: "pair"}, "A ", link(c.a, "#/run/" + c.a), " · B ", link(c.b, "#/run/" + c.b), " · ", c.shared,
          " samples both scored, ", el("b", {id: "differ"}, c.differ), " differ (shown first)"),
       el("p", {}, prev, next),
       table(["task", "sample", "score A", "score B", "answer A", "answer B"], rows, "compare"));
}

function boardPage(q) {
  const runs = q.get("runs") || "";
  show(el("nav", {}, link("all runs", "#/")), el("h1", {}, "Leaderboard"),
       el("iframe", {src: "/leaderboard?runs=" + encodeURIComponent(runs), style: "width:100%;height:80vh;border:0"}));
}

async function render() {
  const {parts, q} = route();
  try {
    if (parts[0] === "run" && parts[1]) await runPage(parts[1], q);
    else if (parts[0] === "compare" && parts[2]) await comparePage(parts[1], parts[2], q);
    else if (parts[0] === "leaderboard") boardPage(q);
    else await runsPage(q);
  } catch (e) {
    show(el("nav", {}, link("all runs", "#/")), el("p", {class: "bad", id: "error"}, String(e.message || e)));
  }
}
window.addEventListener("hashchange", () => { clearTimeout(timer); render(); });
render();
"""


def page_html(nonce: str, cache: str) -> str:
    """The page, its script allowed by `nonce` (the Content-Security-Policy's)."""
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>asyncbench view</title>"
            f"<style>{_CSS}</style></head><body><p class=\"note\">asyncbench view · {escape(cache)}</p>"
            f"<div id=\"main\">loading…</div><script nonce=\"{escape(nonce)}\">{_JS}</script></body></html>")
