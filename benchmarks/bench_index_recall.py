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
hnswlib at each ``ef``; the recall is the share of the exact pool that hnswlib's holds,
ties counted as ann-benchmarks counts them (a row as similar as the exact pool's last is a
true neighbour).
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
        """hnswlib's ``ef`` when searching with it; absent (as on an exact index) otherwise,
        so that the store and its consolidation treat the index as the one in use."""
        if self.mode == "exact":
            raise AttributeError("ef_search")
        return self.hnsw.ef_search

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        self.hnsw.ef_search = value

    def add(self, labels: np.ndarray, vectors: np.ndarray) -> None:
        self.exact.add(labels, vectors)
        self.hnsw.add(labels, vectors)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.active.search(queries, k)

    def get_vectors(self, labels: np.ndarray) -> np.ndarray:
        return self.exact.get_vectors(labels)


def pool(tee: TeeIndex, ef: int | None, store: SmartVectorStore, at: float,
         vector: np.ndarray, size: int, lifecycle: bool) -> tuple[set[int], np.ndarray]:
    """A method's pool (rows and their cosines), by exact search (``ef`` None) or by
    hnswlib at ``ef``; the index is left on exact search (the replay's)."""
    tee.mode = "exact" if ef is None else "hnsw"
    if ef is not None:
        tee.hnsw.ef_search = ef
    try:
        res = store.search(None, at, 1, vector=vector, pool=size, weights=SEMANTIC,
                           lifecycle=lifecycle, record_access=False)
    finally:
        tee.mode = "exact"
    return set(res.rows.tolist()), np.asarray(res.semantic, dtype=np.float64)


def recall(truth: tuple[set[int], np.ndarray], got: tuple[set[int], np.ndarray]) -> float:
    """The share of the exact pool hnswlib's pool matches, ties counted as ann-benchmarks
    counts them: a row of hnswlib's pool whose cosine is at least the exact pool's lowest
    (less 1e-6) is a true neighbour (pools of identical texts tie exactly)."""
    rows, sims = truth
    if not rows:
        return 1.0
    found = int(np.sum(got[1] >= sims.min() - 1e-6))
    return min(found, len(rows)) / len(rows)


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


def measure(corpus: str, efs: list[int], m: int = 16, ef_construction: int = 200
            ) -> dict[str, Any]:
    register()
    with initialize_config_dir(version_base="1.3", config_dir=str(ROOT / "conf")):
        cfg = compose(config_name="config", overrides=[f"dataset={corpus}"])
    settings = validate(cfg, ROOT)
    work = ROOT / ".cache" / "bench_index_recall" / corpus
    work.mkdir(parents=True, exist_ok=True)
    ds = materialise(settings, work, ROOT)
    embedder = MemoEmbedder(shared_embedder(cfg.embedder, ROOT))
    qvecs = dict(zip([q.id for q in ds.queries],
                     embedder.encode([q.text for q in ds.queries]), strict=True))
    methods = pooled_methods(settings)
    by_store: dict[str, list[str]] = defaultdict(list)
    for name, (config, _, _) in methods.items():
        by_store[repr(config)].append(name)
    found: dict[tuple[str, int], list[float]] = defaultdict(list)
    for names in by_store.values():
        config = methods[names[0]][0]
        tee = TeeIndex(embedder.dim, M=m, ef_construction=ef_construction)
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
                _, size, lifecycle = methods[name]
                ask = (store, obj.ts, qvecs[obj.id], size, lifecycle)
                truth = pool(tee, None, *ask)
                for ef in efs:
                    found[(name, ef)].append(recall(truth, pool(tee, ef, *ask)))
    return {"queries": len(ds.queries), "vectors": len(tee), "methods": {
        name: {"pool": methods[name][1], "lifecycle": methods[name][2], "recall": {
            str(ef): {"mean": float(np.mean(found[(name, ef)])),
                      "min": float(np.min(found[(name, ef)])),
                      "all_found": float(np.mean(np.array(found[(name, ef)]) == 1.0))}
            for ef in efs}} for name in methods}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default="policy_synth,site_policy,peps")
    ap.add_argument("--ef", default="16,32,64,128")
    ap.add_argument("--m", type=int, default=16, help="hnswlib's M (graph degree)")
    ap.add_argument("--ef-construction", type=int, default=200)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    efs = [int(x) for x in args.ef.split(",")]
    res: dict[str, Any] = {"benchmark": "index_recall", "machine": machine(),
                           "M": args.m, "ef_construction": args.ef_construction, "corpora": {}}
    for corpus in args.corpora.split(","):
        res["corpora"][corpus] = measure(corpus, efs, args.m, args.ef_construction)
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
