"""Journal ingest CPU per answer (bench/memory_cache_size.md): 20,000 answers written through
`store.journal.ingest` in batches of B (default 500) into a fresh cache, process CPU.

    PYTHONPATH=TREE .venv/bin/python bench/ingest_batch.py [B]

Works on trees before schema v7 too (their `ingest` takes `fresh`), so two trees can be
run alternately.
"""

from __future__ import annotations

import inspect
import sys
import tempfile
import time
from pathlib import Path

from asyncbench.ledger import RequestEntry
from asyncbench.store import Store
from asyncbench.store.journal import Journal, ingest

fresh = "fresh" in inspect.signature(ingest).parameters
d=Path(tempfile.mkdtemp())
store=Store(d/"c.duckdb", keep_open=True)
j=Journal(store.path,"r")
n=0
B=int(sys.argv[1]) if len(sys.argv)>1 else 500
for b in range(20000//B):
    for i in range(B):
        k=f"{b}-{i}"
        j.append({"key":k,"provider":"p","model":"m","endpoint":"e","request_json":"{}","text":"answer","finish_reason":"stop","prompt_tokens":10,"completion_tokens":2,"cached_prompt_tokens":0,"latency_ms":1.0,"cost_usd":0.0,"served_by":"u","created_at":1.0}, RequestEntry(invocation=1,purpose="eval",task="t",source="sent",key=k,sample_id=k,prompt_tokens=10,completion_tokens=2,cost_usd=0.0,latency_ms=1.0,attempts=1), f"prompt {k}")
    path=j.rotate()
    t0=time.process_time()
    with store.transaction():
        ingest(store,path,fresh=True) if fresh else ingest(store,path)
    n+=time.process_time()-t0
    j.done(path)
print(f"{'old' if fresh else 'new'} batches of {B}: {n*1000:.0f} CPU-ms, {n/20000*1e6:.1f} us/answer")
