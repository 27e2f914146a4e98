"""Large pools: what filtering inside hnswlib's search, or a partitioned index, would give.

    python -m benchmarks.bench_filtering [--sizes 1e4,1e5] [--queries 300]

A SmartVector query over a pool of P needs the P nearest rows *visible* at its time. The
store asks hnswlib for more rows than P (P / visible share x 1.25, at least ``ef``) and
filters them after the search ("post-filter"); at pools of 50 and 100 that index search alone
costs more than 1.5x plain hnswlib's top-10 at 10^4 and 10^5 (``bench_query``). This benchmark
measures, on the same knowledge base as ``bench_query`` (:mod:`benchmarks.workload`, same
seed), the index work of the alternatives, one query at a time on one thread, each method
over the whole query set in turn, three rounds in rotated order after a warm-up round:

* ``post_filter``: the store's own first index search (``store._index_search`` at the fetch
  ``store.search`` would make), and ``store.search`` itself (``record_access=False``);
* ``in_search``: hnswlib's ``knn_query(k=P, filter=...)`` with the visibility of every row at
  the query's time, so that hnswlib keeps searching until it holds ``ef`` visible rows.
  hnswlib calls a Python callback per candidate row; its cost is measured by an allow-all
  callback on the unfiltered search (``in_search_allow_all`` minus ``unfiltered``, per
  call) and subtracted, call for call: the estimate is what the same search would cost with
  a free, compiled filter;
* ``partition``: two hnswlib indexes of the same rows (same M, ef_construction, ef): the rows
  not superseded by the end of the timeline ("live") and the others ("ended"). A "now" query
  searches the live index only (every live row is visible now); a time-travel query searches
  both, each post-filtered with its own visible share, and the two results are merged;
* ``live_copy``: the store's index as it is plus a copy of its live rows in a second index:
  "now" queries search the copy, time travel the full index (post-filter). Its cost is memory:
  the copy's bytes per vector of the store are reported (hnswlib's saved index size per row).

Times are of the index searches alone (what follows them, picking the visible rows and
ranking them, is the same for every method); ``sv_search`` is the whole query, for reference.
Every method's pool is checked against the exact P nearest visible rows (recall@P), and
``plain_top10`` (``knn_query(k=10)`` at the same ef) is the baseline of every ratio.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable

import hnswlib
import numpy as np

from smartvector.query import _FETCH_MARGIN, first_fetch

from .bench_query import CONSOLIDATE_AT, exact_truth  # the same knowledge bases
from .common import machine, sizes_arg, write_result
from .workload import T0, build, make_corpus, queries

K = 10
POOLS = (50, 100)
EF = 64  # bench_query's ef at 10^4 and 10^5 (the smallest of its grid reaching recall 0.95)
ROUNDS = 3


def work_estimate(unfiltered_us: float, allow_all_us: float, allow_all_calls: float,
                  filtered_us: float, filtered_calls: float) -> float:
    """A filtered search's time less its callbacks, each costed at what an allow-all
    callback adds to the unfiltered search per call (microseconds)."""
    per_call = (allow_all_us - unfiltered_us) / allow_all_calls
    return filtered_us - filtered_calls * per_call


def hnsw(X: np.ndarray, rows: np.ndarray, threads: int) -> hnswlib.Index:
    """An hnswlib index of ``X[rows]`` labelled by row, as the store builds its own."""
    h = hnswlib.Index(space="cosine", dim=X.shape[1])
    h.init_index(max_elements=max(1, len(rows)), M=16, ef_construction=200, random_seed=0)
    h.add_items(X[rows], rows.astype(np.uint64), num_threads=threads)
    return h


def saved_bytes(h: hnswlib.Index) -> int:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "index.bin")
        h.save_index(path)
        return os.path.getsize(path)


def search(h: hnswlib.Index, q: np.ndarray, k: int, filt=None) -> tuple[np.ndarray, np.ndarray]:
    h.set_ef(max(EF, k))
    return h.knn_query(q, k=k, num_threads=1, filter=filt)


def counting(allowed: list[bool] | None, calls: list[int]) -> Callable[[int], bool]:
    """hnswlib's filter callback: ``allowed[label]`` (None: every row), counting its calls."""
    if allowed is None:
        def every(label: int) -> bool:
            calls[0] += 1
            return True
        return every

    def visible(label: int) -> bool:
        calls[0] += 1
        return allowed[label]
    return visible


def bench_size(n: int, args, log) -> dict:
    corpus = make_corpus(n, seed=args.seed)
    store = build(corpus, threads=args.threads, consolidate_at=CONSOLIDATE_AT, log=log).store
    N = len(store)
    Q, AT = queries(corpus, args.queries, seed=args.seed + 1)
    now = AT >= T0 + corpus.days * 86400
    store.index.num_threads = 1
    store.index.ef_search = EF
    h = store.index._index
    X = store.index.get_vectors(np.arange(N))
    created, sup = store.columns["created_at"], store.columns["superseded_at"]
    vis = (created[None, :] <= AT[:, None]) & ~(sup[None, :] <= AT[:, None])  # (queries, N)
    vis_lists = [v.tolist() for v in vis]
    live_rows = np.flatnonzero(~(sup <= AT.max()))
    ended_rows = np.flatnonzero(sup <= AT.max())
    t = time.perf_counter()
    live, ended = hnsw(X, live_rows, args.threads), hnsw(X, ended_rows, args.threads)
    log(f"  {N:,} rows: {len(live_rows):,} live, {len(ended_rows):,} ended; partition built in "
        f"{time.perf_counter() - t:.1f} s")
    parts = [(live, live_rows), (ended, ended_rows)]
    share_in = [[float(vis[i, rows].mean()) if len(rows) else 0.0 for _, rows in parts]
                for i in range(len(Q))]

    pool_rows = exact_truth(store, Q, AT, K, max(POOLS))[2]  # nearest first
    exact = {p: [set(rows[:p].tolist()) for rows in pool_rows] for p in POOLS}

    def post_filter_search(i: int, p: int) -> np.ndarray:
        """The store's first index search for a pool of ``p`` (its labels)."""
        q = np.asarray(Q[i], np.float32).reshape(1, -1)
        return store._index_search(q, store._first_fetch(float(AT[i]), p, True, N))[0][0]

    def post_filter(i: int, p: int) -> np.ndarray:
        lab = post_filter_search(i, p).astype(np.int64)
        return lab[vis[i, lab]][:p]

    def partition_search(i: int, p: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each part's search, post-filtered with that part's visible share (parts without
        a visible row are skipped)."""
        return [search(idx, Q[i], first_fetch(p, share, EF, len(rows)))
                for (idx, rows), share in zip(parts, share_in[i], strict=True) if share > 0]

    def partitioned(i: int, p: int) -> np.ndarray:
        found = partition_search(i, p)
        lab = np.concatenate([lab[0] for lab, _ in found]).astype(np.int64)
        dist = np.concatenate([dist[0] for _, dist in found])
        lab = lab[np.argsort(dist, kind="stable")]
        return lab[vis[i, lab]][:p]

    def live_copy_search(i: int, p: int) -> object:
        return search(live, Q[i], p) if now[i] else post_filter_search(i, p)

    def live_copy(i: int, p: int) -> np.ndarray:
        if now[i]:
            return search(live, Q[i], p)[0][0].astype(np.int64)
        return post_filter(i, p)

    calls = [0]
    methods: dict[str, Callable[[int], object]] = {
        "plain_top10": lambda i: search(h, Q[i], K)}
    for p in POOLS:
        methods |= {
            f"post_filter_{p}": lambda i, p=p: post_filter_search(i, p),
            f"sv_search_{p}": lambda i, p=p: store.search(
                None, AT[i], k=K, vector=Q[i], pool=p, record_access=False),
            f"unfiltered_{p}": lambda i, p=p: search(h, Q[i], p),
            f"in_search_allow_all_{p}": lambda i, p=p: search(h, Q[i], p, counting(None, calls)),
            f"in_search_{p}": lambda i, p=p: search(h, Q[i], p, counting(vis_lists[i], calls)),
            f"partition_{p}": lambda i, p=p: partition_search(i, p),
            f"live_copy_{p}": lambda i, p=p: live_copy_search(i, p)}
    names = list(methods)
    times = {m: np.zeros((ROUNDS, len(Q))) for m in names}
    n_calls = {m: np.zeros(len(Q)) for m in names}
    for rnd in range(ROUNDS + 1):
        k0 = rnd % len(names)
        for m in names[k0:] + names[:k0]:
            for i in range(len(Q)):
                calls[0] = 0
                t = time.perf_counter()
                methods[m](i)
                dt = time.perf_counter() - t
                if rnd:
                    times[m][rnd - 1, i] = dt
                    n_calls[m][i] = calls[0]

    groups = {"all": np.ones(len(Q), bool), "now": now, "time_travel": ~now}
    p50 = {g: {m: round(float(np.median(times[m][:, sel])) * 1e6, 1) for m in names}
           for g, sel in groups.items()}
    out: dict = {"n": N, "ef": EF, "live_rows": len(live_rows), "ended_rows": len(ended_rows),
                 "visible_share_now": round(float(vis[now].mean()), 3),
                 "visible_share_time_travel": round(float(vis[~now].mean()), 3),
                 "p50_us": p50, "pools": {}}
    full_b, live_b = saved_bytes(h), saved_bytes(live)
    out["memory"] = {"index_bytes_per_row": round(full_b / N),
                     "live_copy_bytes_per_store_row": round(live_b / N)}
    for p in POOLS:
        res: dict = {}
        for g, sel in groups.items():
            t = p50[g]
            c_allow = float(n_calls[f"in_search_allow_all_{p}"][sel].mean())
            c_vis = float(n_calls[f"in_search_{p}"][sel].mean())
            work = work_estimate(t[f"unfiltered_{p}"], t[f"in_search_allow_all_{p}"], c_allow,
                                 t[f"in_search_{p}"], c_vis)
            base = t["plain_top10"]
            res[g] = {
                "filter_calls_allow_all": round(c_allow, 1),
                "filter_calls_visible": round(c_vis, 1),
                "in_search_work_us": round(work, 1),
                "vs_plain_top10": {
                    "post_filter_index": round(t[f"post_filter_{p}"] / base, 2),
                    "sv_search": round(t[f"sv_search_{p}"] / base, 2),
                    "in_search_work": round(work / base, 2),
                    "partition": round(t[f"partition_{p}"] / base, 2),
                    "live_copy": round(t[f"live_copy_{p}"] / base, 2)}}
        rec = {}
        for name, fn in (("post_filter", post_filter), ("partition", partitioned),
                         ("live_copy", live_copy),
                         ("in_search", lambda i, p: search(h, Q[i], p, vis_lists[i].__getitem__)
                          [0][0].astype(np.int64))):
            rec[name] = round(float(np.mean([len(set(fn(i, p).tolist()) & exact[p][i]) / p
                                             for i in range(len(Q))])), 4)
        res["recall_at_pool"] = rec
        out["pools"][str(p)] = res
        log(f"  pool {p}: " + "; ".join(f"{g} {res[g]['vs_plain_top10']}" for g in groups)
            + f"; recall@{p} {rec}")
    log(f"  memory: index {out['memory']['index_bytes_per_row']} B/row, live copy "
        f"{out['memory']['live_copy_bytes_per_store_row']} B per store row")
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=sizes_arg, default=sizes_arg("1e4,1e5"))
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2, help="hnswlib threads for building")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    res: dict = {"benchmark": "filtering", "machine": machine(), "k": K,
                 "params": {"M": 16, "ef_construction": 200, "ef_search": EF, "pools": POOLS,
                            "fetch_margin": _FETCH_MARGIN, "queries": args.queries,
                            "seed": args.seed, "build_threads": args.threads, "query_threads": 1,
                            "rounds": ROUNDS},
                 "sizes": {}}
    for n in args.sizes:
        print(f"size {n:,}")
        res["sizes"][str(n)] = bench_size(n, args, print)
    res["wall_s"] = round(time.perf_counter() - t0, 1)
    write_result("filtering", res, args.out)
    return res


if __name__ == "__main__":
    main()
