"""Rebuild results/benchmarks/README.md from the benchmarks' JSON files.

    python -m benchmarks.summary

The tables are generated; the analysis paragraphs (what bounds a missed target) live in
``results/benchmarks/NOTES.md`` and are appended verbatim.
"""

from __future__ import annotations

import json

from .common import RESULTS


def _load(name: str) -> dict | None:
    p = RESULTS / f"{name}.json"
    return json.loads(p.read_text()) if p.exists() else None


def _machine(m: dict) -> str:
    return (f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM; Python {m['python']}, "
            f"numpy {m['numpy']}, hnswlib {m['hnswlib']}; {m['date']}; load average at start "
            f"{m['load_avg_at_start'][0]:.1f} (the machine was shared)")


def _ok(cond: bool) -> str:
    return "met" if cond else "**missed**"


def query_section(q: dict) -> list[str]:
    out = ["## 1. Query latency and recall", "",
           f"`{q['machine']['command']}`: {_machine(q['machine'])}; wall time {q['wall_s']:.0f} s.",
           "",
           "One query at a time, one thread, interleaved across methods; p50 in microseconds. "
           "`plain top-10` / `top-100` is `knn_query` on the store's own hnswlib index (ef 64 "
           "/ 100); `SmartVector` is `store.query(k=10)` (pool of the 100 nearest *visible* "
           "rows, four signals, hits); `candidates` is its ANN + filter stage alone.", "",
           "| vectors | plain top-10 | plain top-100 | SmartVector | (now / time travel) | "
           "candidates | SV / top-10 | SV / top-100 | searches per query | recall@10 ANN stage "
           "| recall@10 plain | final top-10 vs exact pool | PoC (extrapolated) | speed-up vs "
           "PoC |",
           "|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in q["sizes"].values():
        lt, rc = r["latency"], r["recall_at_10"]
        out.append(
            f"| {r['n']:,} | {lt['plain_top10']['p50_us']:.0f} | {lt['plain_top100']['p50_us']:.0f}"
            f" | {lt['smartvector']['p50_us']:.0f} | {lt['smartvector_now']['p50_us']:.0f} / "
            f"{lt['smartvector_time_travel']['p50_us']:.0f} | {lt['sv_candidates']['p50_us']:.0f}"
            f" | {r['ratios_p50']['smartvector_vs_plain_top10']:.2f}x | "
            f"{r['ratios_p50']['smartvector_vs_plain_top100']:.2f}x | "
            f"{r['overfetch']['searches_per_query_mean']:.2f} | "
            f"{rc['ann_stage_vs_exact_visible']:.3f} | {rc['plain_hnswlib_vs_exact']:.3f} | "
            f"{rc['final_top10_overlap_with_exact_pool']:.3f} | "
            + (f"{r['poc_p50_us_extrapolated'] / 1000:,.0f} ms | x{r['speedup_vs_poc']:,.0f} |"
               if "poc_p50_us_extrapolated" in r else "- | - |"))
    if "poc" in q:
        p = q["poc"]
        pts = ", ".join(f"{m['n']:,}: {m['p50_us'] / 1000:.1f} ms" for m in p["measured"])
        out += ["", f"Reference proof-of-concept, measured (p50 per query): {pts}; log-log fit "
                f"exponent {p['fit']['exponent']:.2f}. Figures beyond {p['measured'][-1]['n']:,}"
                " vectors are **extrapolated** with that fit."]
    out += ["", "Store state at the end of the timeline, visible share at query times and the "
            "over-fetch (searches per query, rows fetched per pool row):", ""]
    for r in q["sizes"].values():
        out.append(f"- {r['n']:,}: {r['store_at_end']}; visible share "
                   f"{r['visible_share_at_query_times']}; {r['overfetch']}; embeddings "
                   f"{r['embedding_stats']}; build: ingestion {r['ingest_s']} s, consolidation "
                   f"passes {r['consolidate_s']} s")
    out += ["", "Over-fetch sweep (pool = 10 x overfetch; p50 us and top-10 overlap with the "
            "default overfetch 10):", "",
            "| vectors | " + " | ".join(f"overfetch {o}" for o in
                                       next(iter(q["sizes"].values()))["overfetch_sweep"]) + " |",
            "|---:|" + "---|" * len(next(iter(q["sizes"].values()))["overfetch_sweep"])]
    for r in q["sizes"].values():
        out.append(f"| {r['n']:,} | " + " | ".join(
            f"{v['p50_us']:.0f} us, {v['top10_overlap_with_overfetch_10']:.3f}"
            for v in r["overfetch_sweep"].values()) + " |")
    if q.get("minilm"):
        m = q["minilm"]
        out += ["", f"Real all-MiniLM-L6-v2 embeddings of the same generated texts ({m['n']:,} "
                f"vectors): random-pair cosine {m['cosine_random_pairs_mean']}, nearest-neighbour"
                f" cosine {m['cosine_nearest_neighbour_mean']}; recall@10 ANN stage "
                f"{m['recall_at_10']['ann_stage_vs_exact_visible']:.3f}, plain hnswlib "
                f"{m['recall_at_10']['plain_hnswlib_vs_exact']:.3f}; p50 plain top-10 "
                f"{m['latency']['plain_top10']['p50_us']:.0f} us, SmartVector "
                f"{m['latency']['smartvector']['p50_us']:.0f} us."]
    return out


def consolidation_section(c: dict) -> list[str]:
    out = ["## 2. Consolidation", "",
           f"`{c['machine']['command']}`: {_machine(c['machine'])}; wall time {c['wall_s']:.0f} s.",
           "", "hnswlib index built and searched with 2 threads (`num_threads=2`). `initial` = "
           "first pass after bulk ingestion (every vector new: contradiction search for all); "
           "`next` = a pass 60 days later (every vector active: dormancy check for all); "
           "`full` = both.", "",
           "| vectors | ingestion | initial pass | (index search) | next pass | full | "
           "contradictions | dependency edges | ripples | dormant | archived | PoC "
           "(extrapolated) |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in c["sizes"].values():
        i, nx = r["passes"]["initial"], r["passes"]["next"]
        est = r.get("poc_seconds_extrapolated")
        poc = f"{est:,.0f} s ({est / 3600:,.1f} h)" if est is not None else "-"
        out.append(f"| {r['n']:,} | {r['ingest_s']:.1f} s | {i['seconds']:.1f} s | "
                   f"{i['index_search_s']:.1f} s | {nx['seconds']:.1f} s | {r['full_s']:.1f} s | "
                   f"{i['report']['contradictions']:,} | {i['report']['dependency_edges']:,} | "
                   f"{i['report']['ripples']:,} | {nx['report']['dormant']:,} | "
                   f"{i['report']['archived'] + nx['report']['archived']:,} | {poc} |")
    if "fit" in c:
        f = c["fit"]
        out += ["", f"Log-log exponents (1 = linear): initial {f['initial']['exponent']:.2f}, "
                f"next {f['next']['exponent']:.2f}, full {f['full']['exponent']:.2f}."]
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


def main() -> None:
    parts = ["# Scale and speed benchmarks", "",
             "Generated by `python -m benchmarks.summary` from the JSON files next to this one; "
             "each benchmark is one command (below) and records its machine. All ratios are "
             "measured in one run on the same machine.", ""]
    for name, fn in (("query", query_section), ("consolidation", consolidation_section),
                     ("updates", updates_section), ("memory", memory_section)):
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
