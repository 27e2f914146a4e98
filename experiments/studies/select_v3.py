"""Choose SmartVector v3's settings on development data only, then freeze them.

``python -m experiments.studies.select_v3`` builds the development cells of the
pre-registration (``results/preregistration.md``): the synthetic corpus on the development
half of the fact bank (``facts=dev``, held-out size) at development seeds (100-104 by
default) in each of the 27 distinct regimes, and the development splits (by document) of the
three real corpora. It refuses test seeds (0-39), test facts and test splits: none is ever
generated here. It replays the other methods and a staged grid of v3 settings through the
harness's own retrievers (settings that share a store share one replay), and picks the
setting whose worst cell margin over the best other method is largest (ties: higher mean
margin, then the earlier grid point). It fits an isotonic map from v3's top score to
P(correct) on the chosen setting's development predictions and writes both to
``conf/methods/smartvector_v3.yaml``; every grid point's per-cell accuracy and the choice go
to ``results/v3/``.

The design (:mod:`experiments.methods.smartvector_v3`) was fixed before the search; the
search sets its numbers: stage 1 the store's consolidation (with a few ranking settings),
stage 2 the ranking on the chosen store.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import OmegaConf
from tqdm import tqdm

from experiments.data.dataset import Dataset, load_dataset
from experiments.data.registry import get_kind
from experiments.methods import Context, make_retriever
from experiments.protocol.job import share_groups
from experiments.protocol.memo import MemoEmbedder
from experiments.protocol.replay import grade_run, replay_shared
from experiments.studies.figures import REAL_CORPORA as REAL
from experiments.studies.select_v2 import fit_calibration, method_node, regimes
from smartvector import StoreConfig
from smartvector.chunking import chunk_text

ROOT = Path(__file__).resolve().parents[2]
DEV_SEEDS = (100, 101, 102, 103, 104)
TEST_SEEDS = range(0, 40)  # Table 1's 0-19 and the pre-registered 20-39
#: the pre-registration's held-out size of the synthetic corpus
SIZE = {"n_topics": 20, "n_dependents": 6, "n_current_queries": 40, "n_as_of_queries": 36,
        "n_dependent_queries": 13}
#: the other methods of the pre-registration that run in this process without a server
#: or a second package (qdrant_filter, time_weighted and the paper's code are left out)
OTHERS = ("plain_cosine", "smartvector", "latest_only", "lifecycle_only", "bm25",
          "bm25_lifecycle", "hybrid_rrf")
K = 10

#: the fixed store design (v2's: validity-anchored signals, authority-margin resolution)
STORE: dict[str, Any] = {
    "temporal": {"anchor": "validity", "half_life_days": 180.0},
    "confidence": {"anchor": "validity", "half_life_days": 180.0},
    "consolidation": {"resolution": "authority_margin", "contradiction_penalty": 0.5},
    "record_access": False,
}
STAGE1_STORE = {"contradiction_similarity": (0.5, 0.7), "authority_margin": (0.2, 0.4)}
STAGE1_RANK = {"w_lexical": (0.0, 0.3), "w_temporal": (0.0, 1.0), "w_confidence": (0.0, 0.5),
               "subject_similarity": (0.95,)}
#: stage 2 on the chosen store; w_confidence stays at stage 1's choice
STAGE2_RANK = {"w_lexical": (0.0, 0.15, 0.3, 0.6), "rrf_k": (10, 60),
               "subject_similarity": (0.9, 0.95, 0.98), "w_temporal": (1.0, 2.0),
               "doc_weight": (0.0, 0.5)}


def check_development(seeds: tuple[int, ...], facts: str = "dev", split: str = "dev") -> None:
    """Raise ValueError (one line) if any of the data asked for is test data."""
    test = sorted(set(seeds) & set(TEST_SEEDS))
    if test:
        raise ValueError(f"--seeds {test[0]} is a test seed (0-39 are test seeds); "
                         "choose development seeds, e.g. 100-119")
    if facts != "dev":
        raise ValueError(f"facts={facts!r}: v3 is chosen on the development facts only")
    if split != "dev":
        raise ValueError(f"split={split!r}: v3 is chosen on the development splits only")


@dataclass(frozen=True)
class Cell:
    name: str
    corpora: tuple[tuple[int, Dataset], ...]  # (seed, dataset)


def v3_node(store: dict[str, float], rank: dict[str, Any]) -> dict[str, Any]:
    """The v3 method config for one grid point."""
    cfg = json.loads(json.dumps(STORE))
    cfg["consolidation"].update(store)
    return {"kind": "smartvector_v3", **rank, "store": cfg}


def _load(path: Path) -> Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_dataset(path)


def development_cells(seeds: tuple[int, ...], tmp: Path, real: tuple[str, ...] = REAL
                      ) -> list[Cell]:
    """The 27 synthetic regimes at ``seeds`` on the development facts, and the real corpora's
    development splits."""
    check_development(seeds)
    kind = get_kind("policy_synth")
    cells = []
    for reg in regimes():
        corpora = []
        for seed in seeds:
            cfg = kind.config(seed=seed, facts="dev", query_timing=reg.timing,
                              contradiction_rate=reg.rumor_rate, supersession=reg.supersession,
                              validity_windows=reg.windows, **SIZE)
            out = tmp / f"{reg.name.replace('/', '_')}-{seed}"
            corpora.append((seed, _load(kind.materialise(cfg, out, ROOT))))
        cells.append(Cell(reg.name, tuple(corpora)))
    for name in real:
        rk = get_kind(name)
        cfg = rk.config(split="dev")
        check_development(seeds, split=cfg.split)
        cells.append(Cell(name, ((0, _load(rk.materialise(cfg, tmp / name, ROOT))),)))
    return cells


def run_methods(ds: Dataset, nodes: dict[str, dict], ctx: Context,
                qvecs: dict[str, np.ndarray]) -> pd.DataFrame:
    """Every method's predictions on one corpus; methods with equal state keys share a
    replay."""
    retrievers = [make_retriever(name, node, ctx) for name, node in nodes.items()]
    frames = []
    for group in share_groups(retrievers, feedback=False):
        for res in replay_shared(ds, group, qvecs, k=K):
            frames.append(pd.DataFrame(grade_run(ds, res)))
    return pd.concat(frames, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=lambda s: tuple(int(x) for x in s.split(",")),
                    default=DEV_SEEDS, help="development seeds (never the test seeds 0-39)")
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--cache", default=".cache/embeddings.sqlite")
    ap.add_argument("--out", default="conf/methods/smartvector_v3.yaml")
    ap.add_argument("--results", default="results/v3")
    args = ap.parse_args(argv)
    try:
        check_development(args.seeds)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from smartvector.embedders import make_embedder

    emb = MemoEmbedder(make_embedder(args.embedder, args.cache or None))
    ctx = Context(emb, StoreConfig())
    cells = development_cells(args.seeds, Path(tempfile.mkdtemp(prefix="select-v3-")))
    corpora = [ds for c in cells for _, ds in c.corpora]
    texts = sorted({ch.text for ds in corpora for v in ds.corpus
                    for ch in chunk_text(v.text, ctx.store_config.max_chunk_chars)}
                   | {q.text for ds in corpora for q in ds.queries})
    print(f"{len(cells)} development cells, {len(corpora)} corpora, {len(texts)} distinct "
          "texts to embed", file=sys.stderr)
    emb.encode(texts)
    qv = {id(ds): {q.id: emb.encode([q.text])[0] for q in ds.queries} for ds in corpora}

    def accuracy(nodes: dict[str, dict], desc: str) -> pd.DataFrame:
        """Accuracy per (cell, method), every corpus of a cell pooled."""
        rows = []
        for cell in tqdm(cells, desc=desc, file=sys.stderr):
            for seed, ds in cell.corpora:
                pred = run_methods(ds, nodes, ctx, qv[id(ds)])
                pred["cell"], pred["seed"] = cell.name, seed
                rows.append(pred)
        return pd.concat(rows, ignore_index=True)

    others = accuracy({m: method_node(m) for m in OTHERS}, "other methods")
    other_acc = others.assign(ok=others.grade.eq("correct")).groupby(
        ["cell", "method"])["ok"].mean().unstack()
    best_other = other_acc.max(axis=1)

    grid: list[tuple[str, dict, dict]] = []
    for vals in itertools.product(*STAGE1_STORE.values()):
        store = dict(zip(STAGE1_STORE, vals, strict=True))
        for rv in itertools.product(*STAGE1_RANK.values()):
            grid.append((f"s1-{len(grid)}", store, dict(zip(STAGE1_RANK, rv, strict=True))))
    s1 = accuracy({name: v3_node(st, rk) for name, st, rk in grid}, "stage 1")
    table, margins1 = score(s1, best_other)
    best_store, best_rank = next((st, rk) for n, st, rk in grid if n == table.index[0])
    stage2 = []
    for rv in itertools.product(*STAGE2_RANK.values()):
        stage2.append((f"s2-{len(stage2)}", best_store,
                       {"w_confidence": best_rank["w_confidence"],
                        **dict(zip(STAGE2_RANK, rv, strict=True))}))
    s2 = accuracy({name: v3_node(st, rk) for name, st, rk in stage2}, "stage 2")
    table2, margins2 = score(s2, best_other)
    everything = {name: (st, rk) for name, st, rk in grid + stage2}
    both = pd.concat([table, table2]).sort_values(
        ["worst_margin", "mean_margin", "order"], ascending=[False, False, True])
    chosen = both.index[0]
    store, rank = everything[chosen]
    pred = pd.concat([s1, s2])
    pred = pred[pred.method == chosen]
    node = v3_node(store, rank)
    node["calibration"] = fit_calibration(pred)
    out = ROOT / args.results
    out.mkdir(parents=True, exist_ok=True)
    settings = pd.DataFrame([{"grid_point": n, **{f"store.{k}": v for k, v in st.items()},
                              **rk} for n, (st, rk) in everything.items()]).set_index(
        "grid_point")
    both.join(settings).to_csv(out / "selection.csv", float_format="%.4f")
    pd.concat([margins1, margins2]).T.to_csv(out / "selection_margins.csv",
                                             float_format="%.4f")
    per_cell = other_acc.assign(best_other=best_other)
    per_cell["smartvector_v3"] = pred.assign(ok=pred.grade.eq("correct")).groupby(
        "cell")["ok"].mean()
    per_cell["margin"] = per_cell["smartvector_v3"] - per_cell["best_other"]
    per_cell.to_csv(out / "selection_per_cell.csv", float_format="%.4f")
    write_yaml(ROOT / args.out, node, args.seeds, both.loc[chosen], len(everything))
    print(f"chosen {chosen}: store {store}, ranking {rank}; worst development margin "
          f"{both.loc[chosen, 'worst_margin']:+.3f}, mean {both.loc[chosen, 'mean_margin']:+.3f};"
          f" wrote {args.out} and {out}/")
    return 0


def score(pred: pd.DataFrame, best_other: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per grid point: the worst and mean margin over the best other method across cells,
    best first; and every cell's margin."""
    acc = pred.assign(ok=pred.grade.eq("correct")).groupby(["method", "cell"])["ok"].mean()
    margin = acc.unstack().sub(best_other, axis=1)
    order = {m: i for i, m in enumerate(dict.fromkeys(pred.method))}
    out = pd.DataFrame({"worst_margin": margin.min(axis=1), "mean_margin": margin.mean(axis=1),
                        "worst_cell": margin.idxmin(axis=1),
                        "order": [order[m] for m in margin.index]})
    return out.sort_values(["worst_margin", "mean_margin", "order"],
                           ascending=[False, False, True]), margin


def write_yaml(path: Path, node: dict, seeds: tuple[int, ...], row: pd.Series,
               n_points: int) -> None:
    head = (f"# SmartVector v3: chosen by `python -m experiments.studies.select_v3` on the "
            f"development facts at\n# seeds {','.join(map(str, seeds))} (27 regimes) and the "
            f"real corpora's development splits,\n# among {n_points} grid points; never on "
            f"test data. Do not edit by hand: rerun the selection.\n# Worst development "
            f"margin over the best other method {row['worst_margin']:+.3f} "
            f"({row['worst_cell']}), mean {row['mean_margin']:+.3f}.\n")
    path.write_text(head + OmegaConf.to_yaml(OmegaConf.create({"smartvector_v3": node})))


if __name__ == "__main__":
    raise SystemExit(main())
