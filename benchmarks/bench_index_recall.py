"""Recall of each method's candidate pool with hnswlib, against exact search, on every shipped
corpus: what ``protocol.index=hnsw`` and its ``protocol.hnsw_ef`` must reach to be the
default (>= 0.99).

    python -m benchmarks.bench_index_recall [--corpora policy_synth,site_policy,peps]
                                            [--ef 16,32,64,128]

Each corpus is replayed as the harness replays it (the real model, the default methods'
store configurations) into a store whose index holds every vector twice, in an exact index
and in an hnswlib index: the replay and its consolidations use the exact one (the reference
state). At each query, each method's pool (its ``pool`` nearest vectors visible at the
query's time, with its lifecycle filter) is taken with the exact index and again with
hnswlib at each ``ef``; the recall is the share of the exact pool that hnswlib's holds.
Searches record no access (the pools of methods that do differ a little from a real run's;
the index's recall is what is measured). Writes ``results/benchmarks/index_recall.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import defaultdict
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from tqdm import tqdm

from experiments.config import method_store_config, register
from experiments.data.loading import materialise
from experiments.methods import make_params
from experiments.protocol.job import shared_embedder
from experiments.protocol.memo import MemoEmbedder
from experiments.protocol.replay import timeline
from experiments.settings import validate
from smartvector import ScoringWeights, SmartVectorStore
from smartvector.index import ExactIndex, HnswIndex
from smartvector.timeutil import DAY

from .common import ROOT, machine, write_result

SEMANTIC = ScoringWeights(1.0, 0.0, 0.0, 0.0)
#: method kinds whose candidates are a pool of the store's nearest visible vectors, and
#: whether each kind filters by lifecycle
POOLED = {"smartvector": True, "lifecycle_only": True, "time_weighted": False}


class TeeIndex:
    """Every vector in an exact and an hnswlib index; searches use ``mode``'s."""

    def __init__(self, dim: int, **hnsw: Any) -> None:
        self.dim = dim
        self.exact, self.hnsw = ExactIndex(dim), HnswIndex(dim, **hnsw)
        self.mode = "exact"

    def __len__(self) -> int:
        return len(self.exact)

    @property
    def active(self) -> Any:
        return self.exact if self.mode == "exact" else self.hnsw

    @property
    def ef_search(self) -> int:
        return getattr(self.active, "ef_search", 0)

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        self.exact.add(labels, vectors)
        self.hnsw.add(labels, vectors)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.active.search(queries, k)

    def get_vectors(self, labels: np.ndarray) -> np.ndarray:
        return self.exact.get_vectors(labels)


def pool_rows(tee: TeeIndex, ef: int | None, store: SmartVectorStore, at: float,
              vector: np.ndarray, pool: int, lifecycle: bool) -> set[int]:
    """The rows of a method's pool, by exact search (``ef`` None) or by hnswlib at ``ef``;
    the index is left on exact search (the replay's)."""
    tee.mode = "exact" if ef is None else "hnsw"
    if ef is not None:
        tee.hnsw.ef_search = ef
    try:
        res = store.search(None, at, 1, vector=vector, pool=pool, weights=SEMANTIC,
                           lifecycle=lifecycle, record_access=False)
    finally:
        tee.mode = "exact"
    return set(res.rows.tolist())


def pooled_methods(settings: Any) -> dict[str, tuple[Any, int, bool]]:
    """Each default method whose candidates come from the store's index: its store config,
    pool and lifecycle filter."""
    out = {}
    for name, node in settings.methods.items():
        cls, params = make_params(name, node)
        kind = cls.kind
        if kind == "cosine":
            lifecycle = params.lifecycle
        elif kind in POOLED:
            lifecycle = POOLED[kind]
        else:
            continue
        config = method_store_config(name, settings.store, getattr(params, "store", None))
        config = dataclasses.replace(config, record_access=False)
        out[name] = (config, params.pool or config.pool, lifecycle)
    return out


def measure(corpus: str, efs: list[int]) -> dict[str, Any]:
    register()
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[f"dataset={corpus}"])
    settings = validate(cfg, ROOT)
    work = ROOT / ".cache" / "bench_index_recall" / corpus
    work.mkdir(parents=True, exist_ok=True)
    ds = materialise(cfg, settings, work, ROOT)
    embedder = MemoEmbedder(shared_embedder(cfg.embedder, ROOT))
    qvecs = dict(zip([q.id for q in ds.queries],
                     embedder.encode([q.text for q in ds.queries]), strict=True))
    methods = pooled_methods(settings)
    by_store: dict[str, list[str]] = defaultdict(list)
    for name, (config, _, _) in methods.items():
        by_store[repr(config)].append(name)
    recall: dict[tuple[str, int], list[float]] = defaultdict(list)
    for names in by_store.values():
        config = methods[names[0]][0]
        tee = TeeIndex(embedder.dim)
        store = SmartVectorStore(embedder, tee, config)
        dirty = None
        for t, kind, obj in tqdm(timeline(ds), desc=f"{corpus} ({', '.join(names)})",
                                 unit="event"):
            day = int(t // DAY)
            if dirty is not None and day != dirty:
                store.consolidate(t)
                dirty = None
            if kind == 0:
                store.add_document(obj.doc_id, obj.text, obj.ts, version=obj.version,
                                   source_type=obj.source_type, authority=obj.authority,
                                   author=obj.author, valid_to=obj.valid_to_ts,
                                   depends_on=obj.depends_on, meta=obj.meta)
                dirty = day
                continue
            if dirty is not None:
                store.consolidate(t)
                dirty = None
            for name in names:
                _, pool, lifecycle = methods[name]
                ask = (store, obj.ts, qvecs[obj.id], pool, lifecycle)
                truth = pool_rows(tee, None, *ask)
                for ef in efs:
                    got = pool_rows(tee, ef, *ask)
                    recall[(name, ef)].append(len(truth & got) / len(truth) if truth else 1.0)
    return {"queries": len(ds.queries), "vectors": len(tee), "methods": {
        name: {"pool": methods[name][1], "lifecycle": methods[name][2], "recall": {
            str(ef): {"mean": float(np.mean(recall[(name, ef)])),
                      "min": float(np.min(recall[(name, ef)])),
                      "all_found": float(np.mean(np.array(recall[(name, ef)]) == 1.0))}
            for ef in efs}} for name in methods}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default="policy_synth,site_policy,peps")
    ap.add_argument("--ef", default="16,32,64,128")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    efs = [int(x) for x in args.ef.split(",")]
    res: dict[str, Any] = {"benchmark": "index_recall", "machine": machine(), "corpora": {}}
    for corpus in args.corpora.split(","):
        res["corpora"][corpus] = measure(corpus, efs)
    write_result("index_recall", res, args.out)
    worst = {ef: min(m["recall"][str(ef)]["mean"] for c in res["corpora"].values()
                     for m in c["methods"].values()) for ef in efs}
    for corpus, c in res["corpora"].items():
        for name, m in c["methods"].items():
            r = m["recall"]
            print(f"{corpus} {name} pool {m['pool']}: " + ", ".join(
                f"ef {ef} {r[str(ef)]['mean']:.4f} (min {r[str(ef)]['min']:.2f})" for ef in efs))
    print("lowest mean recall of any method's pool on any corpus: " + ", ".join(
        f"ef {ef} {v:.4f}" for ef, v in worst.items()))
    return res


if __name__ == "__main__":
    main()
