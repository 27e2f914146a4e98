"""Consolidation ("sleep") cost at 10^4..10^6 vectors, its growth exponent, vs the PoC.

    python -m benchmarks.bench_consolidation [--sizes 1e4,1e5,1e6]

For each size the synthetic knowledge base of :mod:`benchmarks.workload` (30% of vectors
superseded, contradicting quantities, dependencies between documents) is bulk-ingested over
its year on an hnswlib index (M=16, ef_construction=200, 2 threads for building and for the
batched neighbour search), with no consolidation in between. Then, timed:

* ``initial pass`` (day 361): every vector is new, so the pass searches the index neighbours of
  all of them for contradictions (the dominant cost), links the dependencies of every document,
  sends the ripples of every replacement, archives the deprecated and promotes everything;
* ``next pass`` (day 421): nothing new, every vector is active, so the pass checks dormancy
  (live confidence) over all of them, and archives.

``full`` is their sum: every vector went through every step once. With ``--bounded-ef`` (default
21, the smallest ef that returns the k = 21 neighbours asked for) the same two passes are also
timed on a copy of the store made before them, with the neighbour search bounded to that ef
(``ConsolidationParams.search_ef``; the default keeps the index's ef_search 64), with the share
of the default's contradiction pairs it also finds. Sizes below 10^6 are built
and consolidated three times and the run with the median full time is reported (their short
passes are the most sensitive to load from other processes). The exponent of a log-log fit
of time against size says how it grows (1 = linear). The reference proof-of-concept compares
all pairs with difflib; it is timed in a subprocess at small sizes and extrapolated (fitted).
"""

from __future__ import annotations

import argparse
import gc
import pickle
import re
import time

from smartvector.timeutil import DAY

from .common import loglog_fit, machine, poc_vectors, rss_bytes, run_poc, sizes_arg, write_result
from .workload import T0, ingest, make_corpus, new_store

_PAIR = re.compile(r"contradiction (\S+) ~ (\S+) ")


def timed_passes(store, log, label: str = "") -> tuple[dict, set]:
    """The initial and next passes on ``store``, timed, with the index's search and vector
    reads timed inside them (and the queries searched), and the garbage collector's time
    during each pass; returns the passes and the initial pass's contradiction pairs."""
    wrapped = ("search", "get_vectors")  # the index's methods timed here
    spent = dict.fromkeys((*wrapped, "gc"), 0.0)
    queries = [0]
    index = store.index
    for name in wrapped:
        fn = getattr(index, name)

        def timed(*a, _fn=fn, _name=name, **kw):
            t0 = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                spent[_name] += time.perf_counter() - t0
                if _name == "search":
                    queries[0] += len(a[0])
        setattr(index, name, timed)
    gc_start = [0.0]

    def collecting(phase: str, info: dict) -> None:
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            spent["gc"] += time.perf_counter() - gc_start[0]

    passes = {}
    pairs: set = set()
    for which, day in (("initial", 361.0), ("next", 421.0)):
        for k in spent:
            spent[k] = 0.0
        queries[0] = 0
        rss0 = rss_bytes()
        gc.callbacks.append(collecting)
        t = time.perf_counter()
        try:
            rep = store.consolidate(T0 + day * DAY)
        finally:
            dt = time.perf_counter() - t
            gc.callbacks.remove(collecting)
        if which == "initial":
            pairs = {frozenset(m.groups()) for m in map(_PAIR.match, rep.details)}
        passes[which] = {
            "seconds": round(dt, 3), "index_search_s": round(spent["search"], 3),
            "index_get_vectors_s": round(spent["get_vectors"], 3),
            "index_search_queries": queries[0], "gc_s": round(spent["gc"], 3),
            "rss_growth_mib": round((rss_bytes() - rss0) / 2**20, 1),
            "report": {k: getattr(rep, k) for k in ("checked", "dormant", "contradictions",
                                                     "dependency_edges", "ripples", "archived",
                                                     "promoted")}}
        log(f"  {label}{which} pass at day {day:.0f}: {dt:.2f} s (index search "
            f"{spent['search']:.2f} s) {passes[which]['report']}")
    for name in wrapped:
        delattr(index, name)
    return passes, pairs


def bench_size(n: int, args, log) -> dict:
    out: dict = {"n_target": n}
    corpus = make_corpus(n, seed=args.seed)
    store = new_store(threads=args.threads)
    t = time.perf_counter()
    ingest(corpus, store)
    out["ingest_s"] = round(time.perf_counter() - t, 2)
    out["n"] = len(store)
    log(f"  ingested {len(store):,} vectors in {out['ingest_s']} s")
    # the bounded setting runs on a copy of the same store (the build is not deterministic
    # with 2 threads), made before the default passes change it
    copy = pickle.dumps(store, protocol=5) if args.bounded_ef else None
    out["passes"], pairs = timed_passes(store, log)
    out["full_s"] = round(sum(p["seconds"] for p in out["passes"].values()), 3)
    if copy is not None:
        del store
        store = pickle.loads(copy)
        del copy
        # the only index search of a pass is the neighbour search: this bounds exactly what
        # ConsolidationParams.search_ef bounds
        store.index.ef_search = args.bounded_ef
        passes, bounded = timed_passes(store, log, f"ef {args.bounded_ef}: ")
        out["bounded"] = {
            "search_ef": args.bounded_ef, "passes": passes,
            "full_s": round(sum(p["seconds"] for p in passes.values()), 3),
            "default_pairs_found": round(len(pairs & bounded) / max(len(pairs), 1), 4),
            "pairs_not_in_default": len(bounded - pairs)}
        log(f"  ef {args.bounded_ef}: full {out['bounded']['full_s']:.2f} s, finds "
            f"{out['bounded']['default_pairs_found']:.2%} of the default's contradiction "
            f"pairs, and {out['bounded']['pairs_not_in_default']} others")
    return out


def median_run(runs: list[dict]) -> dict:
    """The run whose full pass time is the median (sizes below ``--repeat-below`` are built and
    consolidated ``--repeats`` times: their short passes are the most sensitive to load), with
    every run's times kept."""
    runs = sorted(runs, key=lambda r: r["full_s"])
    out = dict(runs[len(runs) // 2])
    out["runs_full_s"] = [r["full_s"] for r in runs]
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=sizes_arg, default=sizes_arg("1e4,1e5,1e6"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2,
                    help="hnswlib threads for building and the batched neighbour search")
    ap.add_argument("--repeats", type=int, default=3,
                    help="builds and passes per size below --repeat-below (median reported)")
    ap.add_argument("--repeat-below", type=lambda x: int(float(x)), default=1_000_000)
    ap.add_argument("--bounded-ef", type=int, default=21,
                    help="also time the passes with the neighbour search bounded to this "
                         "hnswlib ef (ConsolidationParams.search_ef) on a copy of each store, "
                         "with the share of the default's contradictions found (0: skip)")
    ap.add_argument("--poc-sizes", type=sizes_arg, default=sizes_arg("250,500,1000,2000"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    log = print
    t_start = time.perf_counter()
    res: dict = {"benchmark": "consolidation", "machine": machine(),
                 "params": {"M": 16, "ef_construction": 200, "ef_search": 64,
                            "threads": args.threads, "neighbours": 10, "seed": args.seed,
                            "bounded_ef": args.bounded_ef},
                 "sizes": {}}
    for n in args.sizes:
        log(f"size {n:,}")
        reps = args.repeats if n < args.repeat_below else 1
        runs = [bench_size(n, args, log) for _ in range(reps)]
        res["sizes"][str(n)] = median_run(runs)
    rows = list(res["sizes"].values())
    if len(rows) >= 2:
        fits = {}
        for what, get in (("initial", lambda r: r["passes"]["initial"]["seconds"]),
                          ("next", lambda r: r["passes"]["next"]["seconds"]),
                          ("full", lambda r: r["full_s"]),
                          ("initial_index_search", lambda r: r["passes"]["initial"][
                              "index_search_s"]),
                          ("initial_without_index_search", lambda r: r["passes"]["initial"][
                              "seconds"] - r["passes"]["initial"]["index_search_s"]),
                          ("bounded_initial", lambda r: r["bounded"]["passes"]["initial"][
                              "seconds"]),
                          ("bounded_full", lambda r: r["bounded"]["full_s"])):
            if what.startswith("bounded") and not args.bounded_ef:
                continue
            b, a = loglog_fit([r["n"] for r in rows], [get(r) for r in rows])
            fits[what] = {"exponent": round(b, 3), "coef_s": a}
        res["fit"] = fits
        log("log-log exponents (1 = linear): " +
            ", ".join(f"{k} {v['exponent']:.2f}" for k, v in fits.items()))
    if args.poc_sizes:
        log("reference proof-of-concept (subprocess)")
        meas = []
        for n in args.poc_sizes:
            r = run_poc({"mode": "consolidation", "vectors": poc_vectors(n, args.seed),
                         "repeats": 1})
            meas.append({"n": r["n"], "seconds": round(r["consolidation_s"][0], 3)})
            log(f"  PoC n={r['n']}: {meas[-1]['seconds']:.2f} s")
        b, a = loglog_fit([m["n"] for m in meas], [m["seconds"] for m in meas])
        res["poc"] = {"measured": meas, "fit": {"exponent": round(b, 3), "coef_s": a,
                                               "formula": "seconds = coef_s * n ** exponent"}}
        for r in rows:
            est = a * r["n"] ** b
            r["poc_seconds_extrapolated"] = round(est, 1)
            r["speedup_vs_poc"] = round(est / r["full_s"], 1)
            log(f"  n={r['n']:,}: PoC ~{est:,.0f} s = {est / 3600:,.1f} h (extrapolated), "
                f"SmartVector {r['full_s']:.1f} s")
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    write_result("consolidation", res, args.out)
    return res


if __name__ == "__main__":
    main()
