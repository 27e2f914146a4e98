"""Memory: bytes per stored vector beyond the embedding itself, at 10^6 vectors.

    python -m benchmarks.bench_memory [--n 1e6]

Builds the benchmark knowledge base of :mod:`benchmarks.workload` (30% superseded, consolidated
three times, so events, contradiction/dependency/supersession edges and lifecycle states are all
there) on an hnswlib index (M=16, ef_construction=200, built with 2 threads), then measures:

* Python side, per component: a deep ``sys.getsizeof`` walk of the store's structures (every
  object counted once, where first reached; numpy arrays by their buffers, used rows and
  allocated capacity both reported);
* the hnswlib index: the RSS growth of loading the saved index into a fresh process-side
  ``HnswIndex`` (its graph, labels, locks and lookup table as allocated), minus the raw float32
  vectors (n * dim * 4 bytes);
* cross-checks: the index file size minus the raw vectors, and the process RSS growth over the
  whole build (an upper bound: it also holds freed memory the allocator kept).

The target is under 2x the raw embedding (< 3,072 bytes per 384-d vector) beyond the embedding.
Chunk texts are reported with and without their characters (one copy of a chunk's text is
content any RAG store must keep, not per-vector overhead).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .common import ROOT, machine, rss_bytes, write_result
from .workload import DIM, build, make_corpus

CONSOLIDATE_AT = (120.0, 240.0, 361.0)

# run in a fresh process, so that no memory freed earlier is reused: RSS growth of loading
_LOAD_INDEX = """
import gc, json, sys
from benchmarks.common import rss_bytes
from benchmarks.bench_memory import deep_sizeof
from smartvector import HnswIndex
gc.collect()
r0 = rss_bytes()
index = HnswIndex.load(sys.argv[1])
r1 = rss_bytes()
print(json.dumps({"rss_growth": r1 - r0, "capacity": index.capacity,
                  "label_set": deep_sizeof(index._labels, set())}))
"""


def deep_sizeof(root, seen: set[int]) -> int:
    """Bytes of ``root`` and everything it references that ``seen`` does not hold yet."""
    total = 0
    stack = [root]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            total += sys.getsizeof(o) if o.base is None else sys.getsizeof(o) + o.nbytes
            continue
        total += sys.getsizeof(o)
        if isinstance(o, str | bytes | int | float | bool) or o is None:
            continue
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        else:
            slots = [s for c in type(o).__mro__ for s in getattr(c, "__slots__", ())]
            for s in slots:
                if hasattr(o, s):
                    stack.append(getattr(o, s))
            if hasattr(o, "__dict__"):
                stack.append(o.__dict__)
    return total


def text_chars(store) -> int:
    """Bytes of one copy of every chunk's characters (the content itself)."""
    return sum(len(t.encode("utf-8")) for t in store.texts)


def measure(store, log) -> dict:
    n = len(store)
    seen: set[int] = set()
    comp = {}
    t = time.perf_counter()
    for name, obj in [
        ("ids", store.ids), ("row_of", store._row_of), ("texts", store.texts),
        ("doc_of", store.doc_of), ("source_of", store.source_of), ("meta_of", store.meta_of),
        ("events", store.events), ("docs", store.docs), ("graph", store.graph),
        ("pending_ripple", store.pending_ripple),
    ]:
        comp[name] = deep_sizeof(obj, seen)
    cols = store.columns
    comp["columns_used"] = cols.nbytes()
    comp["columns_capacity_slack"] = sum(a.nbytes for a in cols._data.values()) - cols.nbytes()
    log_ = store.counts  # the counting events' running totals (time-travel lookups)
    comp["count_log"] = log_.values.nbytes + log_.links.nbytes + log_.head.nbytes
    comp["index_label_set"] = deep_sizeof(store.index._labels, seen)
    log(f"  Python walk: {time.perf_counter() - t:.0f} s")
    raw = n * DIM * 4
    (ROOT / ".cache").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / ".cache") as tmp:
        path = Path(tmp) / "index.bin"
        store.index.save(path)
        file_size = path.stat().st_size
        loaded = json.loads(subprocess.run(
            [sys.executable, "-c", _LOAD_INDEX, str(path)], capture_output=True, text=True,
            check=True, cwd=ROOT).stdout.strip().splitlines()[-1])
    capacity = loaded["capacity"]
    comp["hnswlib_graph_in_memory"] = loaded["rss_growth"] - loaded["label_set"] - raw
    per = {k: v / n for k, v in comp.items()}
    chars = text_chars(store)
    total = sum(comp.values())
    return {
        "n": n, "dim": DIM, "raw_embedding_bytes_per_vector": DIM * 4,
        "index_capacity": capacity,
        "components_bytes_per_vector": {k: round(v, 1) for k, v in per.items()},
        "text_chars_bytes_per_vector": round(chars / n, 1),
        "beyond_embedding_bytes_per_vector": round(total / n, 1),
        "beyond_embedding_excluding_one_text_copy": round((total - chars) / n, 1),
        "target_bytes_per_vector": 2 * DIM * 4,
        "index_file_minus_raw_bytes_per_vector": round((file_size - raw) / n, 1),
        "events_per_vector": round(sum(len(v) for v in store.events.values()) / n, 2),
        "edges_per_vector": round(sum(len(v) for adj in store.graph._adj.values()
                                      for v in adj.values()) / n, 2),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    log = print
    t_start = time.perf_counter()
    where = machine()
    corpus = make_corpus(args.n, seed=args.seed)
    gc.collect()
    rss0 = rss_bytes()
    built = build(corpus, threads=args.threads, consolidate_at=CONSOLIDATE_AT, log=log)
    gc.collect()
    rss_build = rss_bytes() - rss0
    store = built.store
    log(f"built {len(store):,} vectors (ingestion {built.ingest_s:.0f} s)")
    res = {"benchmark": "memory", "machine": where,
           "params": {"M": 16, "ef_construction": 200, "threads": args.threads,
                      "seed": args.seed},
           **measure(store, log),
           "rss_growth_over_build_bytes_per_vector": round(rss_build / len(store), 1)}
    res["rss_growth_over_build_minus_raw"] = round(
        res["rss_growth_over_build_bytes_per_vector"] - DIM * 4, 1)
    for k, v in res["components_bytes_per_vector"].items():
        log(f"  {k:>26}: {v:8.1f} B/vector")
    log(f"  beyond the embedding: {res['beyond_embedding_bytes_per_vector']:.0f} B/vector "
        f"({res['beyond_embedding_excluding_one_text_copy']:.0f} without the text itself); "
        f"target < {res['target_bytes_per_vector']}")
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    write_result("memory", res, args.out)
    return res


if __name__ == "__main__":
    main()
