"""Embedding throughput: all-MiniLM-L6-v2 on torch vs OpenVINO, on real policy paragraphs.

    python -m benchmarks.bench_embed [--n 1500] [--blocks 6] [--seed 0] [--corpus PATH]

The texts are a fixed seeded sample of the distinct paragraphs (``chunk_text``, the store's
chunking) of every version of GitHub's site policies (``datasets/site_policy``). Every
backend embeds the same texts through ``MiniLMEmbedder.encode``, the way the library does:
``torch`` (sentence-transformers, batch 64, the reference), ``openvino-f32`` (the default)
and, on CPUs with native bf16, ``openvino-bf16`` (``precision="auto"``). The sample is split
into blocks and each block is embedded by every backend in turn, the order rotating, so a
change of load on the shared machine hits all backends alike; throughput is texts / total
wall time, and each block also gives a ratio (median and range reported). Models are loaded
(and the OpenVINO export made, if missing) before timing.

Agreement with torch: the lowest cosine between a text's two embeddings, the largest change
of any pairwise cosine between two texts of the sample, and the share of texts whose nearest
neighbour in the sample stays the same. Writes ``results/benchmarks/embed.json``; the last
line printed is the speed ratio of the default backend.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

from smartvector.chunking import chunk_text
from smartvector.embedders import DEFAULT_BACKEND, MiniLMEmbedder

from .common import ROOT, machine, write_result

CORPORA = [
    ROOT / "datasets" / "site_policy" / "versions.jsonl.gz",
    ROOT.parent / "shared" / "datasets" / "site-policy" / "versions.jsonl.gz",
]
EXPORT_DIR = ROOT / ".cache" / "openvino"  # where `python -m experiments.run` keeps it
EDGE_TEXTS = ["", "---", "   ", "|---|---|"]


def paragraphs(path: Path) -> list[str]:
    """Distinct chunks of every version of every document, sorted."""
    out: set[str] = set()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            out.update(c.text for c in chunk_text(json.loads(line)["text"]))
    return sorted(out)


def text_stats(texts: list[str], token_counts: list[int], max_len: int) -> dict:
    chars = np.array([len(t) for t in texts])
    toks = np.array(token_counts)
    return {
        "n": len(texts),
        "chars": {"median": float(np.median(chars)), "mean": round(float(chars.mean()), 1),
                  "p10": float(np.percentile(chars, 10)), "p90": float(np.percentile(chars, 90)),
                  "max": int(chars.max())},
        "tokens": {"median": float(np.median(toks)), "mean": round(float(toks.mean()), 1),
                   "p90": float(np.percentile(toks, 90)), "max": int(toks.max())},
        "share_truncated": round(float((toks >= max_len).mean()), 4),
        "max_tokens": max_len,
    }


def agreement(ref: np.ndarray, x: np.ndarray) -> dict:
    """How closely ``x`` reproduces the reference embeddings ``ref`` (same rows)."""
    cos = np.sum(ref.astype(np.float64) * x, axis=1)
    s_ref, s_x = ref @ ref.T, x @ x.T
    diff = float(np.abs(s_ref - s_x).max())
    np.fill_diagonal(s_ref, -np.inf)  # nearest *other* text
    np.fill_diagonal(s_x, -np.inf)
    return {
        "min_cosine": float(cos.min()),
        "mean_cosine": float(cos.mean()),
        "max_abs_pairwise_cos_diff": diff,
        "nearest_neighbour_agreement": float((s_ref.argmax(1) == s_x.argmax(1)).mean()),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1500, help="paragraphs in the sample")
    ap.add_argument("--blocks", type=int, default=6, help="timing blocks (interleaved)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--threads", type=int, default=None, help="OpenVINO threads (default: cores)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    corpus = args.corpus or next((p for p in CORPORA if p.is_file()), None)
    if corpus is None or not corpus.is_file():
        sys.exit(f"error: no site-policy corpus at {args.corpus or CORPORA[0]}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    res: dict = {"benchmark": "embed", "machine": machine()}
    res["machine"]["versions"] = {p: version(p) for p in
                                  ("torch", "sentence-transformers", "openvino", "tokenizers")}
    everything = paragraphs(corpus)
    texts = random.Random(args.seed).sample(everything, min(args.n, len(everything)))
    print(f"{len(texts):,} of {len(everything):,} distinct paragraphs of {corpus.name}")

    backends: dict[str, MiniLMEmbedder] = {
        "torch": MiniLMEmbedder(backend="torch"),
        "openvino-f32": MiniLMEmbedder(backend="openvino", precision="f32",
                                       export_dir=EXPORT_DIR, threads=args.threads),
    }
    bf16 = MiniLMEmbedder(backend="openvino", precision="auto", export_dir=EXPORT_DIR,
                          threads=args.threads)
    if bf16.resolved_precision() == "bf16":
        backends["openvino-bf16"] = bf16
    default = next(k for k, e in backends.items()
                   if e.name == MiniLMEmbedder(backend=DEFAULT_BACKEND).name)
    load_s = {}
    for key, emb in backends.items():
        t = time.perf_counter()
        emb.load()
        load_s[key] = round(time.perf_counter() - t, 2)
        emb.encode(texts[:32])  # warm-up: first inferences allocate
    ov_runner = backends["openvino-f32"]._model
    tokens = [len(ids) for ids in ov_runner.tokenize(texts)]
    where = corpus.relative_to(ROOT) if corpus.is_relative_to(ROOT) else corpus
    res["texts"] = {"corpus": str(where), "seed": args.seed,
                    "distinct_paragraphs": len(everything),
                    **text_stats(texts, tokens, ov_runner.config.max_len)}

    keys = list(backends)
    blocks = np.array_split(np.arange(len(texts)), args.blocks)
    wall = {k: [] for k in keys}
    cpu = {k: [] for k in keys}
    vectors = {k: np.empty((len(texts), 384), dtype=np.float32) for k in keys}
    for b, rows in enumerate(blocks):
        block = [texts[i] for i in rows]
        for j in range(len(keys)):
            key = keys[(b + j) % len(keys)]
            c, t = time.process_time(), time.perf_counter()
            vectors[key][rows] = backends[key].encode(block)
            wall[key].append(time.perf_counter() - t)
            cpu[key].append(time.process_time() - c)
        rates = ", ".join(f"{k} {len(rows) / wall[k][-1]:.0f}/s" for k in keys)
        print(f"  block {b + 1}/{len(blocks)}: {rates}; load {os.getloadavg()[0]:.1f}")

    ref = vectors["torch"]
    edge_ref = backends["torch"].encode(EDGE_TEXTS)
    res["backends"] = {}
    for key in keys:
        emb = backends[key]
        w = np.array(wall[key])
        per_block = np.array(wall["torch"]) / w
        entry = {
            "name": emb.name,
            "batch_size": emb.batch_size,
            "load_s": load_s[key],
            "paragraphs_per_s": round(len(texts) / w.sum(), 1),
            "cpu_s_per_1000": round(1000 * sum(cpu[key]) / len(texts), 2),
            "ratio_vs_torch": round(float(np.sum(wall["torch"]) / w.sum()), 3),
            "ratio_per_block": {"median": round(float(np.median(per_block)), 3),
                                "min": round(float(per_block.min()), 3),
                                "max": round(float(per_block.max()), 3)},
        }
        if key != "torch":
            entry.update(agreement(ref, vectors[key]))
            edge = emb.encode(EDGE_TEXTS)
            entry["edge_texts_min_cosine"] = float(np.sum(edge * edge_ref, axis=1).min())
        res["backends"][key] = entry
    res["default_backend"] = default
    res["ratio"] = res["backends"][default]["ratio_vs_torch"]
    res["min_cosine"] = res["backends"][default].get("min_cosine", 1.0)
    res["params"] = {"n": len(texts), "blocks": args.blocks, "seed": args.seed,
                     "threads": args.threads or "cores"}
    res["machine"]["load_avg_at_end"] = list(os.getloadavg())
    res["wall_s"] = round(time.perf_counter() - t_start, 1)
    for key, e in res["backends"].items():
        extra = (f", min cosine {e['min_cosine']:.7f}, max |pairwise cos diff| "
                 f"{e['max_abs_pairwise_cos_diff']:.1e}, nearest neighbour kept "
                 f"{e['nearest_neighbour_agreement']:.1%}" if key != "torch" else "")
        print(f"{key:>14}: {e['paragraphs_per_s']:6.1f} paragraphs/s, x{e['ratio_vs_torch']:.2f} "
              f"(per block {e['ratio_per_block']['min']:.2f}-{e['ratio_per_block']['max']:.2f})"
              f"{extra}")
    write_result("embed", res, args.out)
    print(f"{default} vs torch: x{res['ratio']:.2f} paragraphs/s (min cosine "
          f"{res['min_cosine']:.7f})")
    return res


if __name__ == "__main__":
    main()
