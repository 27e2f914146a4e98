"""Rebuild results/benchmarks/README.md from the benchmarks' JSON files.

    python -m benchmarks.summary

The tables are generated; the analysis paragraphs (what bounds a missed target) live in
``results/benchmarks/NOTES.md`` and are appended verbatim.
"""

from __future__ import annotations

import json

from .common import RESULTS, loglog_fit


def _load(name: str) -> dict | None:
    p = RESULTS / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else None


def _machine(m: dict) -> str:
    return (f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM; Python {m['python']}, "
            f"numpy {m['numpy']}, hnswlib {m['hnswlib']}; {m['date']}; load average at start "
            f"{m['load_avg_at_start'][0]:.1f} (the machine was shared)")


def _ok(cond: bool) -> str:
    return "met" if cond else "**missed**"


def _sweep_table(q: dict) -> list[str]:
    """The pool sweep (``pool_sweep``, this harness) or the older over-fetch sweep."""
    first_size = next(iter(q["sizes"].values()))
    if "pool_sweep" in first_size:
        key, label = "pool_sweep", "pool"
        base = next(k for k in first_size[key][next(iter(first_size[key]))]
                    if k.startswith("top10_overlap"))
        head = ("Pool sweep (`store.search(..., pool=N)`): p50 and overlap of the top 10 with "
                f"the benchmark's pool ({base.rsplit('_', 1)[-1]}):")
    else:
        key, label, base = "overfetch_sweep", "overfetch", "top10_overlap_with_overfetch_10"
        head = ("Over-fetch sweep (`StoreConfig.overfetch`; pool = 10 x overfetch): p50 and "
                "overlap of the top 10 with the default (overfetch 10):")
    first = first_size[key]
    out = ["", head, "", "| vectors | " + " | ".join(f"{label} {o}" for o in first) + " |",
           "|---:|" + "---|" * len(first)]
    for r in q["sizes"].values():
        out.append(f"| {r['n']:,} | " + " | ".join(
            f"{v['p50_us']:.0f} us, {v[base]:.2f}" for v in r[key].values()) + " |")
    return out


def query_section(q: dict) -> list[str]:
    out = ["## 1. Query latency and recall", "",
           f"`{q['machine']['command']}`: {_machine(q['machine'])}; wall time {q['wall_s']:.0f} s.",
           "",
           "hnswlib index M=16, ef_construction=200, built with 2 threads. Per size, `ef` is the "
           "smallest `ef_search` of the grid at which both plain hnswlib and SmartVector's ANN "
           "stage reach recall@10 >= 0.95 against exact search. Latency: one query at a time on "
           "one thread, p50 in microseconds, each method over the same 300 queries (half 'now', "
           "half time travel), three rounds after a warm-up round. `plain top-10` is "
           "`knn_query(k=10)` on the store's own index at that ef (and at ef 64), `plain top-100`"
           " the same with k=100; `SV pool P` is `store.search(k=10, pool=P)` (the P nearest "
           "*visible* rows, four signals, the ranked pool, access bookkeeping for 'now' "
           "queries): P = 5 is SmartVector v2's pool, 50 the library's default, 100 ten times k; "
           "`candidates` is the ANN + visibility-filter stage alone at pool 100.", "",
           "| vectors | ef | plain top-10 | plain top-10, ef 64 | plain top-100 | SV pool 5 "
           "(now / time travel) | SV pool 50 | SV pool 100 | candidates | **SV / plain top-10** "
           "(pool 5 / 50 / 100) | SV pool 100 / top-100 |",
           "|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|"]
    for r in q["sizes"].values():
        lt, ra = r["latency"], r["ratios_p50"]
        out.append(
            f"| {r['n']:,} | {r['ef_search']} | {lt['plain_top10']['p50_us']:.0f} | "
            f"{lt['plain_top10_ef64']['p50_us']:.0f} | {lt['plain_top100']['p50_us']:.0f} | "
            f"{lt['sv_pool5']['p50_us']:.0f} ({lt['sv_pool5_now']['p50_us']:.0f} / "
            f"{lt['sv_pool5_time_travel']['p50_us']:.0f}) | {lt['sv_pool50']['p50_us']:.0f} | "
            f"{lt['sv_pool100']['p50_us']:.0f} | {lt['sv_candidates']['p50_us']:.0f} | **"
            + " / ".join(f"{ra[f'sv_pool{p}_vs_plain_top10']:.2f}x" for p in (5, 50, 100))
            + f"** | {ra['sv_pool100_vs_plain_top100']:.2f}x |")
    out += ["", "Batched call (`store.search_batch` on blocks of 50 queries at their times, "
            "no accesses recorded) against hnswlib's own batched `knn_query(Q, k=10)` on the "
            "same blocks, both on one thread; microseconds per query, median over blocks and "
            "three rounds:", "",
            "| vectors | plain batch top-10 | SV batch pool 5 | SV batch pool 50 | "
            "SV batch pool 100 | SV batch / plain batch (pool 5 / 50 / 100) |",
            "|---:|---:|---:|---:|---:|---|"]
    for r in q["sizes"].values():
        lt, ra = r["latency"], r["ratios_p50"]
        out.append(f"| {r['n']:,} | {lt['plain_batch_top10']['per_query_us']:.0f} | "
                   + " | ".join(f"{lt[f'sv_batch_pool{p}']['per_query_us']:.0f}"
                                for p in (5, 50, 100)) + " | "
                   + " / ".join(f"{ra[f'sv_batch_pool{p}_vs_plain_batch_top10']:.2f}x"
                                for p in (5, 50, 100)) + " |")
    out += ["", "| vectors | recall@10 ANN stage (now / time travel; worst query) | recall@10 "
            "plain (at ef 64) | final top-10 vs exact pool | rows fetched per pool row | second "
            "searches | PoC p50 (extrapolated) | SmartVector vs PoC |",
            "|---:|---|---|---:|---:|---:|---:|---:|"]
    for r in q["sizes"].values():
        rc, of = r["recall_at_10"], r["overfetch"]
        poc = (f"{r['poc_p50_us_extrapolated'] / 1000:,.0f} ms | **x{r['speedup_vs_poc']:,.0f}**"
               if "poc_p50_us_extrapolated" in r else "- | -")
        out.append(
            f"| {r['n']:,} | {rc['ann_stage_vs_exact_visible']:.3f} ({rc['ann_stage_now']:.3f} / "
            f"{rc['ann_stage_time_travel']:.3f}; {rc['ann_stage_min']:.1f}) | "
            f"{rc['plain_hnswlib_vs_exact']:.3f} ({rc['plain_hnswlib_ef64_vs_exact']:.3f}) | "
            f"{rc['final_top10_overlap_with_exact_pool']:.3f} | "
            f"{of['rows_fetched_per_pool_row_mean']:.2f} | "
            f"{of['share_needing_a_second_search']:.1%} | {poc} |")
    if "poc" in q:
        p = q["poc"]
        pts = ", ".join(f"{m['n']:,}: {m['p50_us'] / 1000:.1f} ms" for m in p["measured"])
        out += ["", f"Reference proof-of-concept (`smartvector-rag` 0.1.1 in a subprocess; it "
                f"scores every non-deprecated vector in Python with keyword overlap), measured "
                f"(fastest of its runs) "
                f"p50 per query: {pts}; log-log fit exponent {p['fit']['exponent']:.2f}. Its "
                f"figures beyond {p['measured'][-1]['n']:,} vectors are **extrapolated** with "
                "that fit; SmartVector's are measured."]
    out += ["", "| vectors | store at the end (active / dormant / deprecated / archived) | "
            "visible share at query times | embeddings: random-pair / 1st-NN / 10th-NN cosine, "
            "local intrinsic dim. | build: ingestion, 3 consolidation passes |",
            "|---:|---|---:|---|---|"]
    for r in q["sizes"].values():
        s, e = r["store_at_end"], r["embedding_stats"]
        out.append(
            f"| {r['n']:,} | {s['active']:,} / {s['dormant']:,} / {s['deprecated']:,} / "
            f"{s['archived']:,} | {r['visible_share_at_query_times']:.2f} | "
            f"{e['cosine_random_pairs_mean']:.2f} / {e['cosine_nearest_neighbour_mean']:.2f} / "
            f"{e['cosine_10th_neighbour_mean']:.2f}, {e['local_intrinsic_dim']} | "
            f"{r['ingest_s']:.0f} s, {' + '.join(f'{x:.0f}' for x in r['consolidate_s'])} s |")
    out += _sweep_table(q)
    if q.get("minilm"):
        m = q["minilm"]
        out += ["", f"Real all-MiniLM-L6-v2 embeddings of the same generated texts ({m['n']:,} "
                f"vectors, ef 64): random-pair / 1st-NN / 10th-NN cosine "
                f"{m['cosine_random_pairs_mean']:.2f} / {m['cosine_nearest_neighbour_mean']:.2f} /"
                f" {m['cosine_10th_neighbour_mean']:.2f}, local intrinsic dimensionality "
                f"{m['local_intrinsic_dim']}; recall@10 ANN stage "
                f"{m['recall_at_10']['ann_stage_vs_exact_visible']:.3f}, plain hnswlib "
                f"{m['recall_at_10']['plain_hnswlib_vs_exact']:.3f}; p50 plain top-10 "
                f"{m['latency']['plain_top10']['p50_us']:.0f} us, SmartVector "
                f"{m['latency']['smartvector']['p50_us']:.0f} us."]
    return out


def filtering_section(f: dict) -> list[str]:
    """``bench_filtering``: the index work of a large pool under each filtering design."""
    def cell(r: dict, key: str) -> str:
        return (f"{r['all']['vs_plain_top10'][key]:.2f}x ({r['now']['vs_plain_top10'][key]:.2f}"
                f" / {r['time_travel']['vs_plain_top10'][key]:.2f})")

    out = ["## 1b. Large pools: filtering alternatives", "",
           f"`{f['machine']['command']}`: {_machine(f['machine'])}; wall time {f['wall_s']:.0f} s.",
           "",
           "The same knowledge bases as section 1 (same seed), ef "
           f"{f['params']['ef_search']}. Index work of finding a pool of P visible rows, per "
           "query, as a multiple of plain hnswlib's top-10 (p50; all queries, then 'now' / "
           "time travel): *post-filter* is the store's own search (over-fetch, then filter); "
           "*in-search filter* is hnswlib's `filter=` search with each row's visibility, its "
           "Python callbacks subtracted at the per-call cost an allow-all callback adds (what a "
           "free compiled filter would cost); *partition*: the live rows and the ended rows in "
           "two indexes, 'now' queries searching the live one, time travel both; *live copy*: "
           "the store's index plus a copy of its live rows for 'now' queries. *Whole query* is "
           "`store.search` (no accesses recorded). Recall: of the exact P nearest visible rows.",
           "",
           "| vectors | pool | post-filter | in-search filter | partition | live copy | whole "
           "query | recall@P (post / in-search / partition / live copy) |",
           "|---:|---:|---|---|---|---|---|---|"]
    for r in f["sizes"].values():
        for p, x in r["pools"].items():
            rec = x["recall_at_pool"]
            out.append(
                f"| {r['n']:,} | {p} | {cell(x, 'post_filter_index')} | "
                f"{cell(x, 'in_search_work')} | {cell(x, 'partition')} | "
                f"{cell(x, 'live_copy')} | {cell(x, 'sv_search')} | "
                f"{rec['post_filter']:.3f} / {rec['in_search']:.3f} / {rec['partition']:.3f} / "
                f"{rec['live_copy']:.3f} |")
    r = next(iter(f["sizes"].values()))
    out += ["", f"Visible share: {r['visible_share_now']:.2f} of the rows for 'now' queries, "
            f"{r['visible_share_time_travel']:.2f} for time travel. The live copy costs "
            f"{r['memory']['live_copy_bytes_per_store_row']:,} bytes per row of the store "
            f"(hnswlib's index: {r['memory']['index_bytes_per_row']:,} bytes per row)."]
    return out


def consolidation_section(c: dict) -> list[str]:
    out = ["## 2. Consolidation", "",
           f"`{c['machine']['command']}`: {_machine(c['machine'])}; wall time {c['wall_s']:.0f} s.",
           "", "hnswlib index built and searched with 2 threads (`num_threads=2`). `initial` = "
           "first pass after bulk ingestion (every vector new: contradiction search for all); "
           "`next` = a pass 60 days later (every vector active: dormancy check for all); "
           "`full` = both. Sizes below 10^6: the median of three builds and passes (every "
           "run's full time in the last column). `(index search)`: the initial pass's neighbour "
           "search and the new vectors it searched (on an HNSW index only those whose texts "
           "state a quantity); `(gc)`: Python's garbage collector during the initial pass.", "",
           "| vectors | ingestion | initial pass | (index search) | (gc) | next pass | full | "
           "contradictions | dependency edges | ripples | dormant | archived | PoC "
           "(extrapolated) | runs (full) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in c["sizes"].values():
        i, nx = r["passes"]["initial"], r["passes"]["next"]
        est = r.get("poc_seconds_extrapolated")
        poc = f"{est:,.0f} s ({est / 3600:,.1f} h)" if est is not None else "-"
        searched = (f"{i['index_search_s']:.1f} s, {i['index_search_queries']:,} of "
                    f"{i['report']['promoted']:,}" if "index_search_queries" in i
                    else f"{i['index_search_s']:.1f} s")
        gc_s = f"{i['gc_s']:.1f} s" if "gc_s" in i else "-"
        out.append(f"| {r['n']:,} | {r['ingest_s']:.1f} s | {i['seconds']:.1f} s | "
                   f"{searched} | {gc_s} | {nx['seconds']:.1f} s | {r['full_s']:.1f} s | "
                   f"{i['report']['contradictions']:,} | {i['report']['dependency_edges']:,} | "
                   f"{i['report']['ripples']:,} | {nx['report']['dormant']:,} | "
                   f"{i['report']['archived'] + nx['report']['archived']:,} | {poc} | "
                   + ", ".join(f"{x:.1f}" for x in r.get("runs_full_s", [r["full_s"]])) + " s |")
    if "fit" in c:
        f = c["fit"]
        rows = list(c["sizes"].values())
        n = [r["n"] for r in rows]
        search = [r["passes"]["initial"]["index_search_s"] for r in rows]
        rest = [r["passes"]["initial"]["seconds"] - x for r, x in zip(rows, search, strict=True)]
        per_q = ", ".join(f"{1e6 * x / r['passes']['initial']['report']['promoted']:.0f}"
                          for r, x in zip(rows, search, strict=True))
        b_search, _ = loglog_fit(n, search)
        b_rest, _ = loglog_fit(n, rest)
        b_rest_top, _ = loglog_fit(n[-2:], rest[-2:])
        out += ["", f"Log-log exponents (1 = linear): initial {f['initial']['exponent']:.2f}, "
                f"next {f['next']['exponent']:.2f}, full {f['full']['exponent']:.2f}. Split: the "
                f"hnswlib neighbour search {b_search:.2f} (its wall time per new vector, 2 "
                f"threads: {per_q} us), the rest of the pass {b_rest:.2f} "
                f"({b_rest_top:.2f} from {n[-2]:,} to {n[-1]:,})."]
    if "poc" in c:
        p = c["poc"]
        pts = ", ".join(f"{m['n']:,}: {m['seconds']:.2f} s" for m in p["measured"])
        out += ["", f"Reference proof-of-concept, one `run_consolidation()`, measured: {pts}; "
                f"log-log exponent {p['fit']['exponent']:.2f}; larger sizes **extrapolated**."]
    return out


def updates_section(u: dict) -> list[str]:
    out = ["## 3. Surgical updates", "",
           f"`{u['machine']['command']}`: {_machine(u['machine'])}; wall time {u['wall_s']:.0f} s.",
           "", f"Store of {u['params']['background_vectors']:,} background vectors (hnswlib); "
           "each edit changes one word of one paragraph. `surgical` = `add_document` of the "
           "new version; `full` = the edited document ingested from scratch (every chunk "
           "re-embedded and inserted).", "",
           "| embedder | chunks per doc | surgical edits/s | chunks re-embedded | full re-index "
           "edits/s | chunks re-embedded | speed-up | embedding share (surgical / full) |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    rows = [("hashing", r) for r in u["hashing"]] + ([("MiniLM", u["minilm"])]
                                                      if u.get("minilm") else [])
    for name, r in rows:
        s, f = r["surgical"], r["full"]
        out.append(f"| {name} | {r['chunks_per_doc']} | {s['edits_per_s']:,.1f} | "
                   f"{s['chunks_reembedded_per_edit']:.2f} | {f['edits_per_s']:,.1f} | "
                   f"{f['chunks_reembedded_per_edit']:.0f} | x{r['speedup']} | "
                   f"{s['embedding_share']:.2f} / {f['embedding_share']:.2f} |")
    return out


def memory_section(m: dict) -> list[str]:
    out = ["## 4. Memory", "",
           f"`{m['machine']['command']}`: {_machine(m['machine'])}; wall time {m['wall_s']:.0f} s.",
           "", f"{m['n']:,} vectors of {m['dim']} dimensions ({m['raw_embedding_bytes_per_vector']}"
           f" bytes of float32 each); {m['events_per_vector']} events and "
           f"{m['edges_per_vector']} edge entries per vector. Python structures measured by a "
           "deep `sys.getsizeof` walk (shared objects counted once); the hnswlib index by the "
           "RSS growth of loading it in a fresh process, minus the raw vectors.", "",
           "| component | bytes per vector |", "|---|---:|"]
    for k, v in m["components_bytes_per_vector"].items():
        out.append(f"| {k} | {v:,.1f} |")
    beyond, target = m["beyond_embedding_bytes_per_vector"], m["target_bytes_per_vector"]
    out += [f"| **total beyond the embedding** | **{m['beyond_embedding_bytes_per_vector']:,.0f}"
            "** |",
            f"| of which the chunk text's own characters (one copy) | "
            f"{m['text_chars_bytes_per_vector']:,.0f} |",
            f"| total without that copy | {m['beyond_embedding_excluding_one_text_copy']:,.0f} |",
            "", f"Target: < {m['target_bytes_per_vector']:,} bytes per vector beyond the "
            f"embedding: {_ok(beyond < target)}. Cross-checks: index file minus raw vectors "
            f"{m['index_file_minus_raw_bytes_per_vector']} B/vector; process RSS growth over "
            "the whole build minus raw vectors "
            f"{m['rss_growth_over_build_minus_raw']:,.0f} B/vector (an upper bound: it includes "
            "memory freed during the build that the allocator kept)."]
    return out


def embed_section(e: dict) -> list[str]:
    t = e["texts"]
    out = ["## 5. Embedding throughput", "",
           f"`{e['machine']['command']}`: {_machine(e['machine'])}; load average at the end "
           f"{e['machine']['load_avg_at_end'][0]:.1f}; wall time {e['wall_s']:.0f} s.", "",
           f"all-MiniLM-L6-v2 through `MiniLMEmbedder.encode` on {t['n']:,} paragraphs sampled "
           f"(seed {t['seed']}) from the {t['distinct_paragraphs']:,} distinct paragraphs of "
           f"`{t['corpus']}` (the store's chunking): {t['chars']['median']:.0f} characters "
           f"median ({t['chars']['p10']:.0f}-{t['chars']['p90']:.0f} p10-p90, max "
           f"{t['chars']['max']:,}), {t['tokens']['median']:.0f} word pieces median, "
           f"{t['share_truncated']:.1%} truncated at {t['max_tokens']}. The sample is split into "
           f"{e['params']['blocks']} blocks, each embedded by every backend in turn (rotating "
           "order), models loaded beforehand; ratios are total wall times, with the range over "
           "blocks. Agreement with torch: lowest cosine between a text's two embeddings, "
           "largest change of a cosine between two texts of the sample, share of texts whose "
           "nearest neighbour in the sample is unchanged.", "",
           "| backend | cache name | batch | paragraphs/s | vs torch (blocks) | min cosine | "
           "max pairwise change | nearest neighbour kept | load |",
           "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for key, b in e["backends"].items():
        bold = "**" if key == e["default_backend"] else ""
        r = b["ratio_per_block"]
        agree = (f"{b['min_cosine']:.7f} | {b['max_abs_pairwise_cos_diff']:.1e} | "
                 f"{b['nearest_neighbour_agreement']:.1%}" if "min_cosine" in b
                 else "(reference) | | ")
        out.append(f"| {bold}{key}{bold} | `{b['name']}` | {b['batch_size']} | "
                   f"{b['paragraphs_per_s']:.1f} | {bold}x{b['ratio_vs_torch']:.2f}{bold} "
                   f"({r['min']:.2f}-{r['max']:.2f}) | {agree} | {b['load_s']:.1f} s |")
    out += ["", f"Default backend: `{e['default_backend']}`. bf16 (where the CPU has it) is "
            "faster still but moves cosines between texts by up to the figure above, enough to "
            "swap near-tied neighbours (a policy's versions differ by a word), so it is opt-in "
            "(`precision=\"bf16\"` or `\"auto\"`)."]
    return out


HARNESS_TARGETS = {  # part -> step -> (target seconds, what)
    "main": {"cold": (8, "main job `python -m experiments.run` cold (a new directory: no "
                         "embedding cache, no MLflow store; the model converted once per user)"),
             "warm": (4, "main job warm (caches warm, a new run)")},
    "site_policy": {"cold": (240, "site-policy corpus (12,678 chunks) cold")},
    "paper": {"cold": (600, "`python -m experiments.studies.paper` (20 seeds, regime map) cold"),
              "warm": (180, "`python -m experiments.studies.paper` warm (everything already run)")},
}


#: the step of older records that ran every study of several jobs in one Hydra sweep
SWEPT = "sweeps"


def index_recall_section(r: dict) -> list[str]:
    """How much of each method's candidate pool hnswlib finds, against exact search."""
    efs = sorted({int(ef) for c in r["corpora"].values() for m in c["methods"].values()
                  for ef in m["recall"]})
    out = ["## 7. hnswlib against exact search: recall of each method's pool", "",
           "`python -m benchmarks.bench_index_recall` (" + _machine(r["machine"]) + f"; hnswlib "
           f"M={r.get('M', 16)}, ef_construction={r.get('ef_construction', 200)}): each "
           "shipped corpus replayed with the real model into a store whose consolidations use "
           "exact search; at every query each default method's pool (its `pool` nearest "
           "visible vectors, its lifecycle filter) with exact search and with hnswlib at each "
           "`ef`. Mean recall over the queries, ties counted as ann-benchmarks counts them "
           "(lowest recall of a query in brackets).", "",
           "| corpus | method | pool | " + " | ".join(f"ef {ef}" for ef in efs) + " |",
           "|---|---|---:|" + "---:|" * len(efs)]
    for corpus, c in r["corpora"].items():
        for name, m in c["methods"].items():
            out.append(f"| {corpus} ({c['vectors']:,} vectors, {c['queries']} queries) | "
                       f"{name} | {m['pool']} | " + " | ".join(
                           f"{m['recall'][str(ef)]['mean']:.4f} "
                           f"({m['recall'][str(ef)]['min']:.2f})" for ef in efs) + " |")
    return out


def harness_section(h: dict) -> list[str]:
    out = ["## 6. The harness: main job, a real corpus, the whole reproduction", "",
           "`python -m benchmarks.bench_harness`: each part in a fresh scratch directory (a link "
           "to `datasets/`, nothing else: no embedding cache, no MLflow store) with an empty "
           "model cache (`SMARTVECTOR_CACHE_DIR`, where the model's one-time OpenVINO "
           "conversion is kept per user), then again in the same directory or, where the step "
           "says so, in a new one. The main job's `first` step is its first run on a machine "
           "(it converts the model), `cold` a run in a new directory after that; `cold`, `warm` "
           "and `skipped` are measured in rounds (a new directory each, `--repeats`, 3 by "
           "default) and the median run is shown, with every run's time. Wall-clock "
           "seconds of the command as a user types it; CPU: user + system seconds of the "
           "command and every process it waited for, and that over the wall time (2 = both "
           "cores busy throughout).", "",
           "| part | step | command | wall time | CPU (cores busy) | load before / after | "
           "machine |",
           "|---|---|---|---:|---:|---|---|"]
    for name, part in h["parts"].items():
        m = part["machine"]
        for label, r in part.items():
            if not isinstance(r, dict) or "wall_s" not in r or label == "machine":
                continue
            runs = ""
            if r.get("runs_s"):
                runs = (f" (median of {len(r['runs_s'])}: "
                        f"{', '.join(f'{w:.1f}' for w in r['runs_s'])} s)")
            cpu = (f"{r['cpu_s']:,.1f} s ({r['cores_busy']:.2f})" if "cpu_s" in r
                   else "not recorded")
            out.append(f"| {name} | {label} | `{r['command']}` | {r['wall_s']:.1f} s{runs} | "
                       f"{cpu} | {r['load_avg_before']:.1f} / {r['load_avg_after']:.1f} | "
                       f"{m['cpu']}, {m['cores']} cores; {m['date']} |")
    for name, part in h["parts"].items():
        for label, r in part.items():
            if isinstance(r, dict) and r.get("studies_s"):
                times = {k: v for k, v in r["studies_s"].items() if k != "total"}
                cpu = r.get("studies_cpu_s") or {}
                out += ["", f"{name} {label}, each step's wall time" + (
                    " (CPU, cores busy)" if cpu else "") + ": " + ", ".join(
                    f"{k} {v:,.1f} s" + (f" ({cpu[k]:,.1f} s, {cpu[k] / v:.2f})"
                                          if k in cpu and v > 0 else "")
                    for k, v in times.items()) + (
                    f"; `{SWEPT}` runs every study of several jobs in one sweep"
                    if SWEPT in times else "") + "."]
    return out


def harness_verdicts(h: dict) -> list[str]:
    out = []
    for name, steps in HARNESS_TARGETS.items():
        part = h["parts"].get(name, {})
        for label, (target, what) in steps.items():
            if label in part:
                w = part[label]["wall_s"]
                extra = ""
                if name == "main" and label == "cold" and "first" in part:
                    extra = (f"; the first run on the machine, converting the model: "
                             f"{part['first']['wall_s']:,.1f} s")
                runs = part[label].get("runs_s")
                spread = (f", median of {len(runs)}: {min(runs):,.1f}-{max(runs):,.1f} s"
                          if runs else "")
                out.append(f"| {what}: under {target:,} s | {w:,.1f} s (load "
                           f"{part[label]['load_avg_before']:.1f}{spread}){extra} | "
                           f"{_ok(w < target)} |")
    return out


def verdicts(q: dict | None, c: dict | None, u: dict | None, m: dict | None,
             emb: dict | None = None, h: dict | None = None) -> list[str]:
    """The issue's targets, each with the measured figure and met / missed."""
    out = ["## Targets", "", "| target | measured | verdict |", "|---|---|---|"]
    if q:
        sizes = list(q["sizes"].values())
        for p, what in ((5, "SmartVector v2's pool of 5"), (50, "the default pool of 50"),
                        (100, "a pool of 100")):
            ratios = [r["ratios_p50"][f"sv_pool{p}_vs_plain_top10"] for r in sizes]
            out.append(f"| SmartVector query within 1.5x of plain hnswlib top-10 (same index, "
                       f"same ef, equal recall) at every size: {what} | " + ", ".join(
                           f"{r['n']:,}: {x:.2f}x" for r, x in zip(sizes, ratios, strict=True))
                       + " | " + ", ".join(f"{r['n']:,} {_ok(x <= 1.5)}"
                                           for r, x in zip(sizes, ratios, strict=True)) + " |")
        rec = [r["recall_at_10"]["ann_stage_vs_exact_visible"] for r in sizes]
        out.append("| recall@10 of the ANN stage >= 0.95 vs exact search | " + ", ".join(
            f"{r['n']:,}: {x:.3f} (ef {r['ef_search']})" for r, x in zip(sizes, rec, strict=True))
            + f" | {_ok(min(rec) >= 0.95)} |")
        at = [r for r in sizes if r["n"] == 100_000 and "speedup_vs_poc" in r]
        if at:
            r = at[0]
            out.append("| >= 1,000x faster than the proof-of-concept at 10^5 | "
                       f"x{r['speedup_vs_poc']:,.0f} (PoC "
                       f"{r['poc_p50_us_extrapolated'] / 1000:,.0f} ms extrapolated, "
                       f"SmartVector pool 100 {r['latency']['sv_pool100']['p50_us']:.0f} us "
                       "measured) | "
                       f"{_ok(r['speedup_vs_poc'] >= 1000)} |")
    if c:
        rows = {r["n"]: r for r in c["sizes"].values()}
        if "fit" in c:
            e = c["fit"]["full"]["exponent"]
            out.append(f"| consolidation: growth exponent <= 1.15 | log-log exponent {e:.2f} "
                       f"(10^4..10^6) | {'met' if e <= 1.15 else '**missed** (see below)'} |")
        if 1_000_000 in rows:
            r = rows[1_000_000]
            s6 = r["full_s"]
            out.append(f"| consolidation: one full pass at 10^6 under a minute | {s6:.1f} s "
                       f"| {_ok(s6 < 60)} |")
            if "bounded" in r:
                b = r["bounded"]
                out.append(f"| the same with the bounded search (`consolidation.search_ef="
                           f"{b['search_ef']}`, opt-in) | {b['full_s']:.1f} s, "
                           f"{b['default_pairs_found']:.0%} of the default's contradiction "
                           f"pairs found | {_ok(b['full_s'] < 60)} |")
        if 100_000 in rows:
            s = rows[100_000]["full_s"]
            out.append(f"| consolidation: one full pass under a minute at 10^5 on 2 cores | "
                       f"{s:.1f} s | {_ok(s < 60)} |")
    if u:
        rows = u["hashing"]
        out.append("| surgical updates: chunks re-embedded per edit vs full re-indexing | "
                   + ", ".join(f"{r['surgical']['chunks_reembedded_per_edit']:.0f} vs "
                               f"{r['full']['chunks_reembedded_per_edit']:.0f}" for r in rows)
                   + f"; x{rows[0]['speedup']}..x{rows[-1]['speedup']} edits/s | reported |")
    if m:
        b = m["beyond_embedding_bytes_per_vector"]
        out.append(f"| memory: < {m['target_bytes_per_vector']:,} bytes per vector beyond the "
                   f"embedding at 10^6 | {b:,.0f} | {_ok(b < m['target_bytes_per_vector'])} |")
    if emb:
        r, cos = emb["ratio"], emb["min_cosine"]
        out.append(f"| embedding: >= 2x torch's throughput on real paragraphs, every embedding "
                   f"within cosine 0.999 | x{r:.2f} ({emb['default_backend']}), min cosine "
                   f"{cos:.7f} | {_ok(r >= 2 and cos >= 0.999)} |")
    if h:
        out += harness_verdicts(h)
    return out


def main() -> None:
    parts = ["# Scale and speed benchmarks", "",
             "Generated by `python -m benchmarks.summary` from the JSON files next to this one; "
             "each benchmark is one command (below) and records its machine. All ratios are "
             "measured in one run on the same machine.", ""]
    parts += verdicts(*(_load(n) for n in ("query", "consolidation", "updates", "memory",
                                           "embed", "harness")))
    parts += [""]
    for name, fn in (("query", query_section), ("filtering", filtering_section),
                     ("consolidation", consolidation_section),
                     ("updates", updates_section), ("memory", memory_section),
                     ("embed", embed_section), ("harness", harness_section),
                     ("index_recall", index_recall_section)):
        data = _load(name)
        if data:
            parts += fn(data) + [""]
    notes = RESULTS / "NOTES.md"
    if notes.exists():
        parts += [notes.read_text().strip(), ""]
    (RESULTS / "README.md").write_text("\n".join(parts))
    print(f"wrote {RESULTS / 'README.md'}")


if __name__ == "__main__":
    main()
