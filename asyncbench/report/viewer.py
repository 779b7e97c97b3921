"""The sample viewer of the HTML report: per run, every sample in a table that filters by
task, status and score range and sorts by score, latency or cost, and a detail pane with
the prompt (long contexts shown as head and tail, with a control to expand), references,
prediction, parsed answer, score and judge calls. For two runs of one benchmark, a table
of the samples where their scores differ.

Still one self-contained file: the samples are inline JSON and the viewer a short inline
script, no external assets. A large run stays a mailable file that opens at once: each
sample is a compact array (no repeated keys), long texts are kept as head and tail so
that all viewers together stay within `SAMPLE_BUDGET` characters (the whole text is one
`asyncbench samples` away), the data is parsed when the viewer first draws, and the table
draws `PAGE` rows at a time ("show more"). The state lives in the URL fragment
(`#samples=RUN&task=T&status=S&min=0&max=0.5&sort=score&open=SAMPLE_ID`; `&expand=1` shows
long prompts whole, `&focus=1` that viewer alone), so a view can be linked to, and tests drive it in headless Chromium by loading such a URL.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Sequence
from html import escape
from typing import TypedDict

from ..json_values import as_list
from .samples import SampleRecord

# Bytes of sample data in one report, all viewers together: SAMPLE_BUDGET, or
# RUN_BUDGET per run when that is more. Above it, the longest texts are cut to head and
# tail (a one-run report of 20,000 samples stays under 3 MB).
SAMPLE_BUDGET = 2_400_000
RUN_BUDGET = 1_600_000
MIN_CUT = 200  # a text is never cut below this many characters (else the prompt is left out)
COLLAPSE_OVER = 4_000  # the detail pane shows a longer prompt as head and tail, expandable
PAGE = 500  # table rows drawn at a time
# one sample in the inline JSON: an array in this order (the script names the positions);
# task and status are indexes into the run's lists, and trailing empty values are left off
FIELDS = ("sample_id", "task", "status", "score", "latency_ms", "usd", "prompt_tokens", "completion_tokens",
          "attempts", "prediction", "references", "prompt", "prompt_cut", "truncated_tokens", "error", "parsed",
          "judge")
CUT, LEFT_OUT = 1, 2  # prompt_cut: kept as head and tail / not in the report at all

CSS = """
.viewer .controls{display:flex;gap:12px;flex-wrap:wrap;align-items:center;margin:8px 0;font-size:13px}
.viewer .samples{max-height:420px;overflow:auto;border:1px solid #ddd}
.viewer table{margin:0}.viewer td.text{text-align:left;max-width:420px;overflow:hidden;text-overflow:ellipsis}
.viewer tbody tr{cursor:pointer}.viewer tbody tr:hover{background:#eef4ff}.viewer tr.open{background:#dde9ff}
.viewer .detail{border:1px solid #ccd;background:#fafbff;padding:8px 12px;margin:8px 0;font-size:13px}
.viewer pre{white-space:pre-wrap;word-break:break-word;max-height:360px;overflow:auto;background:#fff;
border:1px solid #eee;padding:6px;margin:4px 0 10px}
.viewer .gap{color:#a40;font-style:italic}
"""

SCRIPT = r"""
(function(){
const FIELDS=%(fields)s,PAGE=%(page)d,cache={};
function data(run){if(!cache[run]){const raw=JSON.parse(document.getElementById("samples-data-"+run).textContent);
  cache[run]=raw.rows.map(a=>{const r={};FIELDS.forEach((f,i)=>{r[f]=a[i]===undefined?null:a[i];});
    r.task=raw.tasks[r.task];r.status=raw.statuses[r.status];r.run=run;return r;});}return cache[run];}
const fmt=(v,d)=>v===null||v===undefined?"":(typeof v==="number"?v.toFixed(d):String(v));
const one=(t,n)=>{t=t===null||t===undefined?"":String(t).replace(/\s+/g," ");return t.length>n?t.slice(0,n-1)+"\u2026":t};
function state(){const s={};for(const kv of location.hash.slice(1).split("&")){if(!kv)continue;
  const i=kv.indexOf("=");s[decodeURIComponent(kv.slice(0,i))]=decodeURIComponent(kv.slice(i+1));}return s;}
function setState(run,patch){const s=Object.assign(state(),{samples:run},patch);
  const h=Object.entries(s).filter(([k,v])=>v!==""&&v!==undefined&&v!==null)
    .map(([k,v])=>encodeURIComponent(k)+"="+encodeURIComponent(v)).join("&");
  history.replaceState(null,"","#"+h);}
function el(tag,attrs,text){const e=document.createElement(tag);for(const k in attrs||{})e.setAttribute(k,attrs[k]);
  if(text!==undefined)e.textContent=text;return e;}
function block(parent,title,text,collapse){parent.appendChild(el("h4",{},title));
  const pre=el("pre");parent.appendChild(pre);text=text===null||text===undefined?"":String(text);
  const n=%(collapse)d;if(collapse&&text.length>n&&state().expand!=="1"){const head=text.slice(0,n/2),tail=text.slice(-n/2);
    pre.appendChild(document.createTextNode(head));
    const gap=el("span",{"class":"gap"},"\n[\u2026 "+(text.length-n)+" characters \u2026]\n");pre.appendChild(gap);
    pre.appendChild(document.createTextNode(tail));
    const b=el("button",{"class":"expand",type:"button"},"show all "+text.length+" characters");
    b.onclick=()=>{pre.textContent=text;b.remove();};parent.appendChild(b);}
  else pre.textContent=text;}
function prompt(p){return p===null||p===undefined?"(not stored: answered from a cache written before prompts were kept, or never sent)":p;}
function showDetail(viewer,r){const d=viewer.querySelector(".detail");d.textContent="";d.hidden=false;
  d.appendChild(el("h3",{"class":"detail-id"},r.sample_id+" ("+r.task+")"));
  d.appendChild(el("p",{"class":"detail-score"},"score "+fmt(r.score,4)+" \u00b7 "+r.status+" \u00b7 "+
    r.prompt_tokens+"+"+r.completion_tokens+" tokens \u00b7 $"+fmt(r.usd,6)+" \u00b7 "+fmt(r.latency_ms,0)+" ms \u00b7 "+
    r.attempts+" attempt(s)"+(r.shared_with?" \u00b7 the answer of "+r.shared_with+" (same request)":"")+(r.truncated_tokens?" \u00b7 "+r.truncated_tokens+" tokens cut":"")+(r.error?" \u00b7 "+r.error:"")));
  block(d,"Prompt",r.prompt_cut===%(left_out)d?"(left out of this report to keep the file small: `asyncbench samples "+
    r.run+" --format jsonl` has it)":prompt(r.prompt),!r.prompt_cut);
  block(d,"References",(r.references||[]).join("\n\u2014\n"),false);
  block(d,"Prediction",r.prediction,false);
  if(r.parsed!==null&&r.parsed!==undefined)block(d,"Parsed answer",typeof r.parsed==="string"?r.parsed:JSON.stringify(r.parsed),false);
  if(r.judge)block(d,"Judge",r.judge.map(c=>JSON.stringify(c,null,1)).join("\n\n"),false);
  for(const tr of viewer.querySelectorAll("tbody tr"))tr.classList.toggle("open",tr.dataset.id===r.sample_id);}
function render(viewer){const run=viewer.dataset.run,rows=data(run);
  const s=state(),mine=s.samples===run,q=viewer.querySelector.bind(viewer);
  const task=mine?s.task||"":"",status=mine?s.status||"":"",lo=mine&&s.min!==undefined&&s.min!==""?parseFloat(s.min):null,
    hi=mine&&s.max!==undefined&&s.max!==""?parseFloat(s.max):null,sort=mine?s.sort||"":"";
  q(".f-task").value=task;q(".f-status").value=status;q(".f-min").value=lo===null?"":lo;q(".f-max").value=hi===null?"":hi;
  q(".f-sort").value=sort;
  let shown=rows.filter(r=>(!task||r.task===task)&&(!status||r.status===status)&&
    (lo===null||(r.score!==null&&r.score>=lo))&&(hi===null||(r.score!==null&&r.score<=hi)));
  if(sort){const [key,dir]=sort.split(":");const sign=dir==="desc"?-1:1;
    shown=shown.slice().sort((a,b)=>{const x=a[key],y=b[key];if(x===null)return 1;if(y===null)return -1;return sign*(x-y);});}
  const body=q("tbody");body.textContent="";let drawn=0;const more=q(".more");
  function page(){for(const r of shown.slice(drawn,drawn+PAGE)){const tr=el("tr");tr.dataset.id=r.sample_id;
    for(const [v,cls] of [[r.sample_id,"text"],[r.task,"text"],[r.status,""],[fmt(r.score,3),""],
      [one(r.prediction,60),"text"],[one((r.references||[])[0],40),"text"],[fmt(r.latency_ms,0),""],[fmt(r.usd,6),""]])
      tr.appendChild(el("td",cls?{"class":cls}:{},v));
    tr.onclick=()=>{setState(run,{open:r.sample_id});showDetail(viewer,r);};body.appendChild(tr);}
    drawn=Math.min(shown.length,drawn+PAGE);more.hidden=drawn>=shown.length;
    more.textContent="show "+Math.min(PAGE,shown.length-drawn)+" more of "+(shown.length-drawn);}
  more.onclick=page;page();
  q(".count").textContent=shown.length+" of "+rows.length+" samples";
  const open=mine&&s.open?rows.find(r=>r.sample_id===s.open):null;
  if(open)showDetail(viewer,open);else q(".detail").hidden=true;
  if(mine&&s.focus==="1")for(const c of document.body.children)c.hidden=c!==viewer&&c.tagName!=="SCRIPT";}
for(const viewer of document.querySelectorAll(".viewer")){const run=viewer.dataset.run;
  const on=(cls,key)=>{viewer.querySelector(cls).onchange=e=>{setState(run,{[key]:e.target.value});render(viewer);};};
  on(".f-task","task");on(".f-status","status");on(".f-min","min");on(".f-max","max");on(".f-sort","sort");
  render(viewer);}
// a #samples=RUN link scrolls to that viewer, once the figures above it have their height
function scrollToViewer(){const v=document.getElementById("samples-"+state().samples);if(v)v.scrollIntoView();}
window.addEventListener("load",scrollToViewer);
window.addEventListener("hashchange",()=>{for(const v of document.querySelectorAll(".viewer"))render(v);scrollToViewer();});
})();
""" % {"collapse": COLLAPSE_OVER, "fields": json.dumps(FIELDS), "page": PAGE, "left_out": LEFT_OUT}

_SORTS = (("", "sample id"), ("score:asc", "score, low first"), ("score:desc", "score, high first"),
          ("latency_ms:desc", "latency, slow first"), ("usd:desc", "cost, high first"))


def _json_for_script(value: object) -> str:
    """JSON that cannot end its <script> element early."""
    return json.dumps(value, ensure_ascii=False).replace("</", "<\\/").replace("<!--", "<\\!--")


def readable(prompt: str | None) -> str | None:
    """A chat prompt (stored as its JSON messages) as "[role]" blocks; a plain one as is."""
    if prompt is None or not prompt.startswith("[{"):
        return prompt
    try:
        messages = json.loads(prompt)
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)
    except (ValueError, KeyError, TypeError):
        return prompt


def cut(text: str, keep: int, run_id: str) -> str:
    """Head and tail of `text`, about `keep` bytes of UTF-8 in all, and what was left out."""
    chars = max(2, keep * len(text) // max(len(text.encode()), 1))  # Chinese takes 3 bytes a character
    return (f"{text[:chars // 2]}\n[… {len(text) - chars} characters left out of this report: "
            f"`asyncbench samples {run_id} --format jsonl` has them …]\n{text[len(text) - chars // 2:]}")


def _fit(lengths: list[int], budget: int) -> int | None:
    """The largest per-text cap c with sum(min(len, c)) <= budget (None: no cap needed;
    0: not even MIN_CUT fits). Binary search over c, each sum in O(log n) from the
    sorted lengths' prefix sums."""
    if sum(lengths) <= budget:
        return None
    ordered = sorted(lengths)
    prefix = list(itertools.accumulate(ordered, initial=0))

    def total(c: int) -> int:  # sum(min(n, c)): the texts shorter than c whole, the rest c each
        k = bisect.bisect_right(ordered, c)
        return prefix[k] + c * (len(ordered) - k)

    lo, hi = 0, ordered[-1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if total(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo if lo >= MIN_CUT else 0


class _Rows(TypedDict):
    """A run's samples for the viewer's script: task and status names, then each record
    as a FIELDS array holding indexes into them."""

    tasks: list[str]
    statuses: list[str]
    rows: list[list[object]]


def _size(text: object) -> int:
    return len(text.encode()) if isinstance(text, str) else 0


def _trim(row: list[object]) -> list[object]:
    """The row without its trailing empty values (the script reads them as null)."""
    while row and row[-1] in (None, False, 0, [], ""):
        row.pop()
    return row


def _record_row(r: SampleRecord, t_index: dict[str, int], s_index: dict[str, int]) -> list[object]:
    """One record as its FIELDS array (getattr, not dataclasses.asdict: its deep copies
    took ~0.7 ms a sample)."""
    d = {"task": t_index[r.task], "status": s_index[r.status], "prompt": readable(r.prompt),
         "prompt_cut": 0, "score": None if r.score is None else round(r.score, 4),
         "latency_ms": None if r.latency_ms is None else round(r.latency_ms), "usd": float(f"{r.usd:.4g}")}
    return [d[f] if f in d else getattr(r, f) for f in FIELDS]


_P, _PRED, _REFS, _FLAG = (FIELDS.index(f) for f in ("prompt", "prediction", "references", "prompt_cut"))


def _cut_prompt(row: list[object], size: int, cap: int, run_id: str) -> None:
    """A prompt over `cap` as head and tail; every prompt left out when `cap` is 0."""
    prompt = row[_P]
    if isinstance(prompt, str) and cap and size > cap:
        row[_P], row[_FLAG] = cut(prompt, cap, run_id), CUT
    elif isinstance(prompt, str) and not cap:
        row[_P], row[_FLAG] = None, LEFT_OUT


def _cut_others(row: list[object], other_cap: int, run_id: str) -> None:
    """The prediction and references over `other_cap` as head and tail."""
    prediction = row[_PRED]
    if isinstance(prediction, str) and _size(prediction) > other_cap:
        row[_PRED] = cut(prediction, max(other_cap, 40), run_id)
    row[_REFS] = [cut(x, max(other_cap, 40), run_id) if isinstance(x, str) and _size(x) > other_cap else x
                  for x in as_list(row[_REFS])]


def _rows(records: Sequence[SampleRecord], budget: int) -> tuple[_Rows, bool]:
    """The run's samples as {"tasks", "statuses", "rows"}: each record a FIELDS array, its
    texts cut so the JSON stays near `budget` bytes; True when every text is whole."""
    tasks = sorted({r.task for r in records})
    statuses = sorted({str(r.status) for r in records})
    t_index, s_index = {t: i for i, t in enumerate(tasks)}, {s: i for i, s in enumerate(statuses)}
    rows = [_record_row(r, t_index, s_index) for r in records]
    fixed = _size(_json_for_script([[v for i, v in enumerate(row) if i not in (_P, _PRED, _REFS)] for row in rows]))
    prompts = [_size(row[_P]) for row in rows]
    others = [_size(row[_PRED]) + sum(_size(x) for x in as_list(row[_REFS])) for row in rows]
    room = budget - fixed
    cap = _fit(prompts, max(room - sum(others), 0))
    if cap is not None:
        run_id = records[0].run_id
        other_cap = _fit(others, max(room, 0)) if cap == 0 else None  # prompts left out: the rest must fit
        for row, size in zip(rows, prompts):
            _cut_prompt(row, size, cap, run_id)
            if other_cap is not None:
                _cut_others(row, other_cap, run_id)
    return {"tasks": tasks, "statuses": statuses, "rows": [_trim(row) for row in rows]}, cap is None


def sample_viewer(run_id: str, label: str, records: Sequence[SampleRecord], budget: int = SAMPLE_BUDGET) -> str:
    """The viewer of one run: controls, the table, the detail pane and the data (texts cut
    to fit `budget` characters)."""
    rows, full = _rows(records, budget)
    tasks, statuses = rows["tasks"], rows["statuses"]
    options = "".join(f'<option value="{escape(t)}">{escape(t)}</option>' for t in tasks)
    status_options = "".join(f'<option value="{escape(s)}">{escape(s)}</option>' for s in statuses)
    sorts = "".join(f'<option value="{v}">{escape(t)}</option>' for v, t in _SORTS)
    head = "".join(f"<th>{h}</th>" for h in ("sample", "task", "status", "score", "prediction", "reference", "ms",
                                              "USD"))
    note = "" if full else (" Long texts are shown as head and tail here (the run's texts are too large for one "
                            "file); `asyncbench samples` exports them whole.")
    rid = escape(run_id)
    return (f'<div class="viewer" id="samples-{rid}" data-run="{rid}"><h3>Samples: {escape(label)}</h3>'
            f'<p class="note">Click a row for its prompt, references, prediction and judge calls.{note}</p>'
            f'<div class="controls"><label>task <select class="f-task"><option value="">all</option>{options}</select>'
            f'</label><label>status <select class="f-status"><option value="">all</option>{status_options}</select>'
            f'</label><label>score from <input class="f-min" type="number" step="0.01" size="5"></label>'
            f'<label>to <input class="f-max" type="number" step="0.01" size="5"></label>'
            f'<label>sort <select class="f-sort">{sorts}</select></label><span class="count note"></span></div>'
            f'<div class="samples"><table id="samples-table-{rid}"><thead><tr>{head}</tr></thead><tbody></tbody>'
            f'</table></div><button class="more" type="button" hidden></button>'
            f'<div class="detail" id="detail-{rid}" hidden></div>'
            f'<script type="application/json" id="samples-data-{rid}">{_json_for_script(rows)}</script></div>')


def disagreements(a: Sequence[SampleRecord], b: Sequence[SampleRecord], limit: int = 500) -> list[list[str]]:
    """Rows (sample, task, score A, score B, B - A, prediction A, prediction B) of the
    samples both runs scored with different scores, largest difference first."""
    theirs = {(r.task, r.sample_id): r for r in b if r.score is not None}
    rows = []
    for r in a:
        other = theirs.get((r.task, r.sample_id))
        if r.score is None or other is None or other.score is None or other.score == r.score:
            continue
        rows.append((other.score - r.score, r, other))
    rows.sort(key=lambda t: (-abs(t[0]), t[1].task, t[1].sample_id))

    def cut(text: str | None) -> str:
        flat = " ".join((text or "").split())
        return flat if len(flat) <= 80 else flat[:79] + "…"

    return [[r.sample_id, r.task, f"{r.score:.3f}", f"{o.score:.3f}", f"{d:+.3f}", cut(r.prediction), cut(o.prediction)]
            for d, r, o in rows[:limit] if o.score is not None and r.score is not None]

