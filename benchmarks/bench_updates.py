"""Surgical updates vs full re-indexing: edits per second and chunks re-embedded per edit.

    python -m benchmarks.bench_updates [--chunks 5,20,50,100,200,500] [--edits 40]

A store holding a background knowledge base (``--background`` vectors of
:mod:`benchmarks.workload`, bulk-ingested on an hnswlib index built with 2 threads) receives
documents of 5 to 500 chunks (paragraphs of ~250 characters) through ``add_document``. Each
edit changes one word of one random paragraph of one of them (a value: "every 45 days" becomes
"every 50 days", or a verb), and is applied two ways, each timed end to end:

* ``surgical``: ``add_document(doc, edited_text, at)``: chunk, diff by content hash, embed and
  insert only the changed chunk, deprecate the old one with its lineage and edges;
* ``full``: the edited document ingested from scratch (``add_document`` of a new doc id: every
  chunk embedded and inserted), i.e. what re-indexing the document costs in the same store.

With the hashing embedder (``HashingEmbedder``, ~free) the figures show the bookkeeping cost; with
all-MiniLM-L6-v2 (``--minilm-chunks``, one size) they show what a real model adds. Edits per
second are 1 / median latency (``edits_per_s_mean`` uses the mean, which also carries the
occasional pause of an index resize: capacity doubles when it fills, copying the index).
"""

from __future__ import annotations

import argparse
import random
import re
import time

import numpy as np

from smartvector import HashingEmbedder, SmartVectorStore
from smartvector.timeutil import DAY

from .common import machine, sizes_arg, summarise_us, write_result
from .workload import T0, ingest, make_corpus, new_store


class TimedEmbedder:
    """Wraps an embedder, counting texts and time spent embedding."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.texts = 0
        self.seconds = 0.0

    def encode(self, texts):
        t = time.perf_counter()
        out = self.inner.encode(texts)
        self.seconds += time.perf_counter() - t
        self.texts += len(texts)
        return out


_NUM = re.compile(r"every (\d+) ")


def edit_one_word(paras: list[str], rng: random.Random) -> tuple[list[str], int]:
    """A copy of ``paras`` with one word of one paragraph changed; returns it and the index."""
    j = rng.randrange(len(paras))
    p = paras[j]
    m = _NUM.search(p)
    if m:
        new = p[:m.start(1)] + str(int(m.group(1)) + 5) + p[m.end(1):]
    else:
        new = p.replace(" keeps ", " holds ", 1) if " keeps " in p else p.replace(
            " holds ", " keeps ", 1)
    out = list(paras)
    out[j] = new
    return out, j


def run_size(store: SmartVectorStore, emb: TimedEmbedder, texts: list[str], size: int,
             n_docs: int, n_edits: int, t0: float, seed: int) -> dict:
    rng = random.Random(seed + size)
    docs = {}
    for d in range(n_docs):
        s = rng.randrange(0, len(texts) - size)
        docs[f"edit{size}-{d}"] = list(texts[s:s + size])
    t = t0
    for d, paras in docs.items():
        store.add_document(d, "\n\n".join(paras), t, source_type="wiki")
    surgical, full, re_s, re_f, emb_s, emb_f = [], [], [], [], [], []
    for e in range(n_edits):
        d = rng.choice(sorted(docs))
        paras, _ = edit_one_word(docs[d], rng)
        docs[d] = paras
        text = "\n\n".join(paras)
        t += 3600.0
        e0, s0 = emb.texts, emb.seconds
        c = time.perf_counter()
        rep = store.add_document(d, text, t)
        surgical.append(time.perf_counter() - c)
        re_s.append(rep.n_reembedded)
        emb_s.append(emb.seconds - s0)
        assert emb.texts - e0 == rep.n_reembedded
        e0, s0 = emb.texts, emb.seconds
        c = time.perf_counter()
        rep = store.add_document(f"{d}-full{e}", text, t)
        full.append(time.perf_counter() - c)
        re_f.append(rep.n_reembedded)
        emb_f.append(emb.seconds - s0)
    s_med, f_med = float(np.median(surgical)), float(np.median(full))
    return {
        "chunks_per_doc": size, "docs": n_docs, "edits": n_edits,
        "surgical": {**summarise_us(surgical), "edits_per_s": round(1 / s_med, 1),
                     "edits_per_s_mean": round(1 / float(np.mean(surgical)), 1),
                     "chunks_reembedded_per_edit": float(np.mean(re_s)),
                     "embedding_share": round(float(np.sum(emb_s) / np.sum(surgical)), 3)},
        "full": {**summarise_us(full), "edits_per_s": round(1 / f_med, 1),
                 "edits_per_s_mean": round(1 / float(np.mean(full)), 1),
                 "chunks_reembedded_per_edit": float(np.mean(re_f)),
                 "embedding_share": round(float(np.sum(emb_f) / np.sum(full)), 3)},
        "speedup": round(f_med / s_med, 1),
        "reembedding_saved": round(float(np.mean(re_f) / np.mean(re_s)), 1),
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=sizes_arg, default=sizes_arg("5,20,50,100,200,500"))
    ap.add_argument("--edits", type=int, default=40)
    ap.add_argument("--background", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--minilm-chunks", type=int, default=100,
                    help="also time edits with all-MiniLM-L6-v2 at this size (0: skip)")
    ap.add_argument("--minilm-edits", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    log = print
    t_start = time.perf_counter()
    res: dict = {"benchmark": "updates", "machine": machine(),
                 "params": {"background_vectors": args.background, "edits": args.edits,
                            "M": 16, "ef_construction": 200, "threads": args.threads,
                            "seed": args.seed}, "hashing": [], "minilm": None}
    corpus = make_corpus(max(args.background, 20_000), seed=args.seed)
    texts = corpus.texts
    emb = TimedEmbedder(HashingEmbedder(384))
    store = new_store(threads=args.threads)
    store.embedder = emb
    if args.background:
        bg = make_corpus(args.background, seed=args.seed + 7)
        ingest(bg, store)
    store.index.num_threads = 1
    log(f"background store: {len(store):,} vectors")
    t0 = T0 + 400 * DAY
    for size in args.chunks:
        n_docs = max(3, min(20, 2000 // size))
        r = run_size(store, emb, texts, size, n_docs, args.edits, t0, args.seed)
        res["hashing"].append(r)
        log(f"  {size:>3} chunks/doc: surgical {r['surgical']['edits_per_s']:,.0f} edits/s "
            f"({r['surgical']['chunks_reembedded_per_edit']:.1f} chunk re-embedded), full "
            f"{r['full']['edits_per_s']:,.0f} edits/s "
            f"({r['full']['chunks_reembedded_per_edit']:.0f} chunks): x{r['speedup']}")
    if args.minilm_chunks:
        from smartvector import MiniLMEmbedder

        inner = MiniLMEmbedder()
        inner.load()
        memb = TimedEmbedder(inner)
        mstore = SmartVectorStore(memb, new_store(threads=args.threads).index)
        mstore.index.num_threads = 1
        r = run_size(mstore, memb, texts, args.minilm_chunks, 3, args.minilm_edits, t0,
                     args.seed)
        res["minilm"] = r
        log(f"  MiniLM, {args.minilm_chunks} chunks/doc: surgical "
            f"{r['surgical']['edits_per_s']:.1f} edits/s, full {r['full']['edits_per_s']:.2f} "
            f"edits/s: x{r['speedup']}")
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    write_result("updates", res, args.out)
    return res


if __name__ == "__main__":
    main()
