"""Rebuild every table and figure of the paper reproduction from the results directories.

``python -m experiments.studies.figures [--results-root outputs] [--out results]``

Reads the finished results directories of the ``paper_*`` and ``real_*`` studies
(``<results-root>/<study>/<fingerprint>/``: the configuration, its metrics and predictions),
pools the predictions of the seeds and bootstraps 95% CIs over the pooled queries. Writes
Markdown and CSV tables and PNG figures into ``results/`` and refreshes the tables inside
``results/REPORT.md`` between ``<!-- table:NAME -->`` markers. Wall-clock figures are never
put in a table, so tables regenerate identically.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import yaml

from experiments.protocol.evaluate import method_metrics
from experiments.protocol.metrics import (
    cluster_rate_ci,
    ece,
    mcnemar,
    plot_reliability,
    rate_ci,
    seed_paired_test,
)
from experiments.protocol.reembed import COSTS
from experiments.results.provenance import flatten
from experiments.results.record import CONFIG_FILE, PREDICTIONS_FILE, RESULTS_FILE, read_results

WEIGHTS = ("semantic", "temporal", "confidence", "relational")
#: the re-embedding study's results file (experiments.studies.reembed_study)
REEMBED_FILE = "reembed.json"


class Store:
    """The finished results directories under one root, one study a folder."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def parents(self, study: str) -> list:
        """Each finished configuration of ``study``: its params (the flattened
        configuration, as strings), tags, metrics and per-method quality."""
        runs = []
        for d in sorted((self.root / study).glob("*/")):
            if (d / RESULTS_FILE).is_file():
                try:
                    res = read_results(d)
                except ValueError:
                    continue
                if res.error:
                    continue
                metrics = {**res.reembed, **{f"corpus_{k}": v for k, v in
                                             vars(res.corpus).items()
                                             if isinstance(v, int | float)}}
                methods = {m: r.quality for m, r in res.methods.items()}
            elif (d / REEMBED_FILE).is_file():
                metrics, methods = json.loads((d / REEMBED_FILE).read_text()), {}
            else:
                continue
            config = yaml.safe_load((d / CONFIG_FILE).read_text(encoding="utf-8"))
            runs.append(SimpleNamespace(
                dir=d, methods=methods, info=SimpleNamespace(run_id=d.name),
                data=SimpleNamespace(params={k: str(v) for k, v in flatten(config).items()},
                                     tags={"config_fingerprint": d.name}, metrics=metrics)))
        return sorted(runs, key=pool_order)

    def predictions(self, run) -> pd.DataFrame:
        df = pd.read_csv(run.dir / PREDICTIONS_FILE, keep_default_na=False, na_values=[""])
        for k, v in run.data.params.items():
            if _pooled_param(k):
                df[k] = v
        return df


#: the swept params a study's pooled predictions carry (and are ordered by)
POOLED_PARAMS = ("seed", "dataset.contradiction_rate", "protocol.feedback_rate",
                 "protocol.chunk_context",
                 "query_split", "store.temporal.half_life_days",
                 "store.consolidation.contradiction_similarity",
                 "dataset.authority_age_correlation", "dataset.query_timing",
                 "dataset.supersession", "dataset.validity_windows",
                 "dataset.off_topic_share")


def _pooled_param(key: str) -> bool:
    return key in POOLED_PARAMS or key.startswith("store.weights.")


def pool_order(run) -> tuple:
    """Where a configuration's predictions go in a study's pool: by its swept params
    (numbers as numbers), then its fingerprint. The bootstraps resample rows of the pool, so
    its order must not follow the fingerprint alone: that hash changes whenever the
    configuration gains a key, and every interval moved with it."""
    params = run.data.params

    def value(v: str) -> tuple:
        try:
            return (0, float(v), "")
        except ValueError:
            return (1, 0.0, v)

    swept = sorted((k, value(v)) for k, v in params.items() if _pooled_param(k))
    return (tuple(swept), run.data.tags.get("config_fingerprint", ""))


def _ci(flags: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    return rate_ci(flags, n_boot=2000, seed=seed)


def _fmt(mean: float, lo: float, hi: float, pct: bool = True) -> str:
    if np.isnan(mean):
        return "n/a"
    if pct:
        return f"{100 * mean:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"
    return f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"


def quality(pred: pd.DataFrame) -> dict[str, float]:
    """Pooled figures of one method's predictions: the harness's own per-run metrics
    (:func:`experiments.protocol.evaluate.method_metrics`) over the pooled rows."""
    return method_metrics(pred, seed=0, n_boot=2000)


def ranking_table(pred: pd.DataFrame, out: Path, name: str,
                  qualities: dict[str, dict[str, float]] | None = None) -> dict[str, str]:
    """``<name>_ranking``: per method, the ranking metrics against the relevance labels at the
    question's time (ir-measures' per-query values, pooled), and the two stages: document
    recall@k, then version accuracy given the document at k (with its denominator), and the
    share of top-1 hits from another document. ``qualities``: each method's figures where the
    table beside it already computed them on the same rows (:func:`quality`)."""
    rows = []
    for m in dict.fromkeys(pred["method"]):
        q = qualities[m] if qualities else quality(pred[pred.method == m])
        row = {"method": m,
               "nDCG@10": _fmt(q["ndcg_at_10"], q["ndcg_at_10_ci_lo"], q["ndcg_at_10_ci_hi"],
                               pct=False),
               **{f"R@{k}": f"{q[f'recall_at_{k}']:.3f}" for k in (1, 5, 10)},
               "MRR@10": f"{q['mrr_at_10']:.3f}",
               "doc recall@1": f"{100 * q['doc_recall_at_1']:.1f}%",
               "doc recall@5": _fmt(q["doc_recall_at_5"], q["doc_recall_at_5_ci_lo"],
                                    q["doc_recall_at_5_ci_hi"]),
               "doc recall@10": f"{100 * q['doc_recall_at_10']:.1f}%"}
        for k in (1, 10):
            v, n = q[f"version_accuracy_at_{k}"], int(q[f"doc_found_at_{k}"])
            row[f"version acc. given doc@{k}"] = "n/a (n=0)" if n == 0 else \
                f"{100 * v:.1f}% (n={n})"
        row["top-1 other document"] = f"{100 * q['other_document_rate']:.1f}%"
        rows.append(row)
    return {f"{name}_ranking": write_table(pd.DataFrame(rows), out, f"{name}_ranking")}


def write_table(df: pd.DataFrame, out: Path, name: str) -> str:
    """``<name>.csv`` and ``<name>.md`` in ``out``; returns the markdown."""
    df.to_csv(out / f"{name}.csv", index=False, float_format="%.4f")
    md = df.to_markdown(index=False)
    (out / f"{name}.md").write_text(md + "\n")
    return md


def _pooled(store: Store, experiment: str) -> pd.DataFrame:
    parents = store.parents(experiment)
    if not parents:
        return pd.DataFrame()
    return pd.concat([store.predictions(r) for r in parents], ignore_index=True)


# ----------------------------------------------------------------------------- tables
def table1(store: Store, out: Path) -> dict[str, str]:
    pred = _pooled(store, "paper_table1")
    if pred.empty:
        return {}
    parents = store.parents("paper_table1")
    reembed = {k: np.mean([r.data.metrics[k] for r in parents])
               for k in ("reembed_full_reindex", "reembed_hash_dedup_window",
                         "reembed_hash_dedup_paragraph", "reembed_surgical")}
    rows, ablation = [], []
    calibrated = calibrate(_pooled(store, "paper_table1_dev"), pred)
    base = pred[pred.method == "plain_cosine"].sort_values(["seed", "query_id"])
    order = list(dict.fromkeys(pred["method"]))
    for m in order:
        sub = pred[pred.method == m].sort_values(["seed", "query_id"])
        q = quality(sub)
        test = mcnemar(base["grade"].eq("correct").to_numpy(),
                       sub["grade"].eq("correct").to_numpy()) if m != "plain_cosine" else None
        row = {
            "method": m,
            "top-1 accuracy": _fmt(q["top1_accuracy"], q["top1_accuracy_ci_lo"],
                                   q["top1_accuracy_ci_hi"]),
            "stale rate": _fmt(q["stale_rate"], q["stale_rate_ci_lo"], q["stale_rate_ci_hi"]),
            "contradicted": _fmt(q["contradicted_rate"], q["contradicted_rate_ci_lo"],
                                 q["contradicted_rate_ci_hi"]),
            "ECE": f"{q['ece']:.3f}", "ECE (equal mass)": f"{q['ece_equal_mass']:.3f}",
            "ECE, dev-calibrated": f"{calibrated[m]:.3f}" if m in calibrated else "",
            "Brier": f"{q['brier']:.3f}",
            "McNemar p vs plain": "" if test is None else f"{test['p_value']:.2g}",
        }
        if m.startswith(("no_", "only_")) or m == "smartvector":
            ablation.append({"variant": m, "top-1 accuracy": row["top-1 accuracy"],
                             "stale rate": row["stale rate"],
                             "contradicted": row["contradicted"],
                             "_acc": q["top1_accuracy"], "_lo": q["top1_accuracy_ci_lo"],
                             "_hi": q["top1_accuracy_ci_hi"]})
        if not m.startswith(("no_", "only_")):
            rows.append(row)
    t1 = pd.DataFrame(rows)
    paper = pd.DataFrame([
        {"": "plain cosine, paper", "top-1": "31.0%", "stale": "35.0%", "ECE": "0.470",
         "chunks re-embedded per one-word edit": "4.35"},
        {"": "plain cosine, ours", "top-1": rows[0]["top-1 accuracy"],
         "stale": rows[0]["stale rate"], "ECE": rows[0]["ECE"],
         "chunks re-embedded per one-word edit":
             f"{reembed['reembed_full_reindex']:.2f} (full re-index)"},
        {"": "SmartVector, paper", "top-1": "62.0%", "stale": "13.3%", "ECE": "0.244",
         "chunks re-embedded per one-word edit": "1.0"},
        {"": "SmartVector, ours", **{
            "top-1": next(r["top-1 accuracy"] for r in rows if r["method"] == "smartvector"),
            "stale": next(r["stale rate"] for r in rows if r["method"] == "smartvector"),
            "ECE": next(r["ECE"] for r in rows if r["method"] == "smartvector")},
         "chunks re-embedded per one-word edit":
             f"{reembed['reembed_surgical']:.2f} (surgical)"},
    ])
    ab = pd.DataFrame(ablation)
    smart = ab.loc[ab.variant == "smartvector", "_acc"].iloc[0]
    ab["change vs SmartVector"] = [f"{100 * (a - smart):+.1f} pts" for a in ab["_acc"]]
    _plot_ablation(ab, out / "ablation.png")
    ab = ab.drop(columns=["_acc", "_lo", "_hi"])
    cost = pd.DataFrame([{"strategy": k.removeprefix("reembed_").replace("_", " "),
                          "chunks per one-word edit": f"{v:.2f}"} for k, v in reembed.items()])
    curves = {m: (pred.loc[pred.method == m, "probability"].astype(float).to_numpy(),
                  pred.loc[pred.method == m, "grade"].eq("correct").to_numpy())
              for m in ("plain_cosine", "smartvector", "latest_only") if m in order}
    plot_reliability(curves, out / "reliability.png",
                     title=f"Reliability of the top-1 score (default corpus, "
                           f"{pred['seed'].nunique()} seeds pooled)")
    return {"paper_vs_ours": write_table(paper, out, "paper_vs_ours"),
            "table1": write_table(t1, out, "table1"), "ablation": write_table(ab, out, "ablation"),
            **ranking_table(pred[~pred.method.str.startswith(("no_", "only_"))], out,
                            "table1"),
            "reembed_corpus": write_table(cost, out, "reembed_corpus"),
            **breakdowns(pred, out, "table1")}


def calibrate(dev: pd.DataFrame, test: pd.DataFrame) -> dict[str, float]:
    """Per method, ECE on the test predictions of its raw probability mapped through an
    isotonic fit (score -> P(correct)) on the development predictions; methods without
    development predictions are left out."""
    out = {}
    if dev.empty:
        return out
    for m, d in dev.groupby("method"):
        t = test[test.method == m]
        if not t.empty:
            out[m] = calibrated_ece(d, t)
    return out


def calibrated_ece(dev: pd.DataFrame, test: pd.DataFrame) -> float:
    """ECE (10 uniform bins) of ``test``'s probabilities mapped by an isotonic fit
    (probability -> P(correct)) on ``dev``'s; NaN without development predictions."""
    from sklearn.isotonic import IsotonicRegression

    if dev.empty or test.empty:
        return float("nan")
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(dev["probability"].astype(float).fillna(0).to_numpy(),
            dev["grade"].eq("correct").to_numpy())
    p = iso.predict(test["probability"].astype(float).fillna(0).to_numpy())
    return ece(p, test["grade"].eq("correct").to_numpy(), 10, "uniform")


def _cluster(pred: pd.DataFrame) -> np.ndarray:
    """Cluster label of every prediction: (seed, topic); older predictions without a topic
    column fall back to the query id (no clustering beyond the seed)."""
    topic = pred["topic"] if "topic" in pred.columns else pred["query_id"]
    return (pred["seed"].astype(str) + "|" + topic.astype(str)).to_numpy()


def _acc_by_seed(sub: pd.DataFrame) -> dict[str, float]:
    return sub.groupby("seed")["grade"].apply(lambda g: float((g == "correct").mean())).to_dict()


KEY_METHODS = ("smartvector", "smartvector_v2", "latest_only", "lifecycle_only", "hybrid_rrf",
               "bm25_lifecycle", "qdrant_filter", "no_temporal", "ref_current_cosine",
               "ref_document_scoped")
#: methods shown the gold labels (never "the best other method")
REFERENCES = ("ref_current_cosine", "ref_document_scoped")


def breakdowns(pred: pd.DataFrame, out: Path, name: str,
               baselines: tuple[str, ...] = ("plain_cosine", "latest_only"),
               tested: tuple[str, ...] = KEY_METHODS, seed_tables: bool = True) -> dict[str, str]:
    """Per query kind, per seed, and seed-level paired tests of every method against the
    baselines: ``<name>_by_kind``, ``<name>_by_seed`` and ``<name>_seed_tests``. CIs are
    bootstrapped over queries and, in brackets after them, over (seed, topic) clusters. The
    seed-level tests cover the ``tested`` methods (the CSV and the report alike)."""
    methods = list(dict.fromkeys(pred["method"]))
    kinds = sorted(pred["kind"].unique())
    by_kind = []
    for m in methods:
        sub = pred[pred.method == m]
        row = {"method": m}
        for kind in ["all", *kinds]:
            part = sub if kind == "all" else sub[sub.kind == kind]
            flags = part["grade"].eq("correct").to_numpy()
            a = _ci(flags)
            c = cluster_rate_ci(flags, _cluster(part), n_boot=2000, seed=0)
            row[f"{kind} (n={len(part)})"] = (f"{_fmt(*a)}; clustered [{100 * c[1]:.1f}, "
                                              f"{100 * c[2]:.1f}]")
        by_kind.append(row)
    seeds = sorted(pred["seed"].unique(), key=lambda x: int(x))
    by_seed = []
    for m in methods:
        acc = _acc_by_seed(pred[pred.method == m])
        by_seed.append({"method": m, **{f"seed {s}": f"{100 * acc[s]:.1f}%" for s in seeds},
                        "mean": f"{100 * np.mean(list(acc.values())):.1f}%",
                        "sd": f"{100 * np.std(list(acc.values()), ddof=1):.1f}"
                        if len(acc) > 1 else ""})
    tests = []
    for base in baselines:
        if base not in methods:
            continue
        for kind in ["all", *kinds]:
            part = pred if kind == "all" else pred[pred.kind == kind]
            ref = _acc_by_seed(part[part.method == base])
            for m in methods:
                if m == base or m not in tested:
                    continue
                t = seed_paired_test(ref, _acc_by_seed(part[part.method == m]))
                tests.append({"method": m, "vs": base, "queries": kind,
                              "seeds": int(t["seeds"]),
                              "mean difference": f"{100 * t['mean_diff']:+.1f} pts",
                              "95% t interval": f"[{100 * t['ci_lo']:+.1f}, "
                                                f"{100 * t['ci_hi']:+.1f}]",
                              "sign-flip p": f"{t['p_sign_flip']:.3g}",
                              "paired t p": f"{t['p_ttest']:.3g}"})
    made = {f"{name}_by_kind": write_table(pd.DataFrame(by_kind), out, f"{name}_by_kind")}
    if seed_tables:  # with one seed there is nothing to test at the seed level
        made[f"{name}_by_seed"] = write_table(pd.DataFrame(by_seed), out, f"{name}_by_seed")
        made[f"{name}_seed_tests"] = write_table(pd.DataFrame(tests), out, f"{name}_seed_tests")
    return made


def robustness(store: Store, out: Path) -> dict[str, str]:
    pred = _pooled(store, "paper_robustness")
    if pred.empty:
        return {}
    rows = []
    pred = pred.astype({"dataset.contradiction_rate": float})
    for (rate, m), sub in pred.groupby(["dataset.contradiction_rate", "method"], sort=True):
        q = quality(sub)
        rows.append({"rate": float(rate), "method": m, **{k: q[k] for k in (
            "top1_accuracy", "top1_accuracy_ci_lo", "top1_accuracy_ci_hi", "stale_rate",
            "stale_rate_ci_lo", "stale_rate_ci_hi", "contradicted_rate", "contradicted_rate_ci_lo",
            "contradicted_rate_ci_hi")}})
    df = pd.DataFrame(rows)
    _plot_robustness(df, out / "robustness.png")
    show = pd.DataFrame({
        "rumor rate": [f"{r:.0%}" for r in df["rate"]], "method": df["method"],
        "top-1 accuracy": [_fmt(a, b, c) for a, b, c in zip(
            df.top1_accuracy, df.top1_accuracy_ci_lo, df.top1_accuracy_ci_hi, strict=True)],
        "stale rate": [_fmt(a, b, c) for a, b, c in zip(
            df.stale_rate, df.stale_rate_ci_lo, df.stale_rate_ci_hi, strict=True)],
        "contradicted": [_fmt(a, b, c) for a, b, c in zip(
            df.contradicted_rate, df.contradicted_rate_ci_lo, df.contradicted_rate_ci_hi,
            strict=True)],
    })
    return {"robustness": write_table(show, out, "robustness")}


def time_travel(store: Store, out: Path) -> dict[str, str]:
    pred = _pooled(store, "paper_time_travel")
    if pred.empty:
        return {}
    rows = []
    for m in dict.fromkeys(pred["method"]):
        sub = pred[pred.method == m]
        row = {"method": m}
        for kind in ("all", "current", "as_of", "dependent"):
            s = sub if kind == "all" else sub[sub.kind == kind]
            a = _ci(s["grade"].eq("correct").to_numpy())
            row[f"top-1 ({kind})"] = _fmt(*a)
        row["stale (all)"] = _fmt(*_ci(sub["grade"].eq("stale").to_numpy()))
        rows.append(row)
    return {"time_travel": write_table(pd.DataFrame(rows), out, "time_travel")}


def feedback(store: Store, out: Path) -> dict[str, str]:
    pred = _pooled(store, "paper_feedback")
    if pred.empty:
        return {}
    rows = []
    pred = pred.astype({"protocol.feedback_rate": float})
    for (rate, m), sub in pred.groupby(["protocol.feedback_rate", "method"], sort=True):
        row = {"feedback rate": float(rate), "method": m,
               "top-1 accuracy": _fmt(*_ci(sub["grade"].eq("correct").to_numpy()))}
        for seed_part in range(4):  # chronological quarters within each seed's corpus
            flags = []
            for _, s in sub.groupby("seed", sort=True):
                parts = np.array_split(s["grade"].eq("correct").to_numpy(), 4)
                flags.append(parts[seed_part])
            row[f"Q{seed_part + 1}"] = float(np.concatenate(flags).mean())
        rows.append(row)
    df = pd.DataFrame(rows)
    _plot_feedback(df, out / "feedback.png")
    show = df.copy()
    for c in ("Q1", "Q2", "Q3", "Q4"):
        show[c] = [f"{100 * v:.1f}%" for v in show[c]]
    show["feedback rate"] = [f"{r:.0%}" for r in show["feedback rate"]]
    return {"feedback": write_table(show, out, "feedback")}


def weights(store: Store, out: Path) -> dict[str, str]:
    dev = [r for p in store.parents("paper_weights_dev") for r in [p]]
    test = _pooled(store, "paper_weights_test")
    if not dev or test.empty:
        return {}

    def wkey(params) -> tuple[float, ...]:
        return tuple(float(params[f"store.weights.{w}"]) for w in WEIGHTS)

    dev_rows = []
    for p in dev:
        acc = p.methods.get("smartvector", {}).get("top1_accuracy", float("nan"))
        dev_rows.append((wkey(p.data.params), acc))
    default = (0.35, 0.25, 0.25, 0.15)
    grid = pd.DataFrame([{**dict(zip(WEIGHTS, w, strict=True)), "dev accuracy": a}
                         for w, a in dev_rows]).sort_values(
        ["dev accuracy", *WEIGHTS], ascending=[False, True, True, True, True])
    rows = []
    for key, sub in test.groupby([f"store.weights.{w}" for w in WEIGHTS], sort=True):
        w = tuple(float(x) for x in key)
        label = "paper defaults" if np.allclose(w, default) else "tuned on dev"
        total = sum(w)
        for m in dict.fromkeys(sub["method"]):
            if m != "smartvector" and label == "tuned on dev":
                continue
            s = sub[sub.method == m]
            rows.append({
                "method": m if m != "smartvector" else f"smartvector ({label})",
                "weights (sem/temp/conf/rel)": "/".join(f"{x / total:.2f}" for x in w)
                if m == "smartvector" else "",
                "test top-1 accuracy": _fmt(*_ci(s["grade"].eq("correct").to_numpy())),
                "test stale rate": _fmt(*_ci(s["grade"].eq("stale").to_numpy())),
            })
    top = grid.head(5).copy()
    top["dev accuracy"] = [f"{100 * a:.1f}%" for a in top["dev accuracy"]]
    return {"weights_test": write_table(pd.DataFrame(rows), out, "weights_test"),
            "weights_dev_top": write_table(top, out, "weights_dev_top")}


def sensitivity(store: Store, out: Path) -> dict[str, str]:
    pred = _pooled(store, "paper_sensitivity")
    if pred.empty:
        return {}
    rows = []
    keys = ["store.temporal.half_life_days", "store.consolidation.contradiction_similarity"]
    pred = pred.astype({k: float for k in keys})
    for (half, thr), sub in pred.groupby(keys, sort=True):
        rows.append({
            "temporal half-life (days)": f"{float(half):g}",
            "contradiction threshold (cosine)": f"{float(thr):g}",
            "top-1 accuracy": _fmt(*_ci(sub["grade"].eq("correct").to_numpy())),
            "stale rate": _fmt(*_ci(sub["grade"].eq("stale").to_numpy())),
            "contradicted": _fmt(*_ci(sub["grade"].eq("contradicted").to_numpy())),
        })
    return {"sensitivity": write_table(pd.DataFrame(rows), out, "sensitivity")}


def authority(store: Store, out: Path) -> dict[str, str]:
    pred = _pooled(store, "paper_authority")
    if pred.empty:
        return {}
    key = "dataset.authority_age_correlation"
    pred = pred.astype({key: float})
    rows = []
    for (corr, m), sub in pred.groupby([key, "method"], sort=True):
        rows.append({"revisions via a lower channel": f"{corr:.0%}", "method": m,
                     "top-1 accuracy": _fmt(*_ci(sub["grade"].eq("correct").to_numpy())),
                     "stale rate": _fmt(*_ci(sub["grade"].eq("stale").to_numpy()))})
    return {"authority": write_table(pd.DataFrame(rows), out, "authority")}


def reembed_length(store: Store, out: Path) -> dict[str, str]:
    parents = store.parents("paper_reembed_length")
    if not parents:
        return {}
    rows = [{"paragraphs": int(r.data.params["n_paragraphs"]), "seed": int(r.data.params["seed"]),
             **{k.removeprefix("reembed_"): v for k, v in r.data.metrics.items()
                if k.startswith("reembed_") and k != "reembed_edits"}} for r in parents]
    df = pd.DataFrame(rows).groupby("paragraphs", sort=True).mean(numeric_only=True)
    df = df[[c for c in COSTS if c in df.columns]].reset_index()
    _plot_reembed(df, out / "reembed_length.png")
    show = df.copy()
    for c in show.columns[1:]:
        show[c] = [f"{v:.2f}" for v in show[c]]
    return {"reembed_length": write_table(show, out, "reembed_length")}


# ---------------------------------------------------------------------------- figures
def real_corpora(store: Store, out: Path) -> dict[str, str]:
    """On each real corpus, for each chunk context (``real_<name>`` as written,
    ``real_<name>_title`` with title headers): Table 1 with the accuracy by query timing,
    by value type (or header field) and by document split, the ranking table, and the
    per-kind / per-seed breakdown."""
    made: dict[str, str] = {}
    for name in REAL_CORPORA:
        pooled = _pooled(store, f"real_{name}")
        if pooled.empty:
            continue
        if "protocol.chunk_context" not in pooled.columns:
            pooled["protocol.chunk_context"] = "none"
        for context, pred in pooled.groupby("protocol.chunk_context", sort=True):
            table = f"real_{name}" + ("" if context == "none" else f"_{context}")
            qualities = {m: quality(pred[pred.method == m]) for m in dict.fromkeys(pred.method)}
            made[table] = write_table(_real_table(pred, qualities), out, table)
            made.update(ranking_table(pred, out, table, qualities))
            made.update(breakdowns(pred, out, table, seed_tables=pred["seed"].nunique() > 1))
    return made


REAL_CORPORA = ("site_policy", "peps", "endoflife")


def _real_table(pred: pd.DataFrame, qualities: dict[str, dict[str, float]]) -> pd.DataFrame:
    rows = []
    for m in dict.fromkeys(pred["method"]):
        sub = pred[pred.method == m]
        q = qualities[m]
        row = {"method": m,
               "top-1 accuracy": _fmt(q["top1_accuracy"], q["top1_accuracy_ci_lo"],
                                      q["top1_accuracy_ci_hi"]),
               "stale rate": _fmt(q["stale_rate"], q["stale_rate_ci_lo"],
                                  q["stale_rate_ci_hi"]),
               "ECE": f"{q['ece']:.3f}"}
        for col in ("timing", "value_type", "split"):
            if col in sub.columns and sub[col].astype(bool).any():
                for v, part in sub.groupby(col, sort=True):
                    a = _ci(part["grade"].eq("correct").to_numpy())
                    row[f"{col.replace('_', ' ')}: {v} (n={len(part)})"] = _fmt(*a)
        rows.append(row)
    return pd.DataFrame(rows)


REGIME_KEYS = ["dataset.query_timing", "dataset.contradiction_rate", "dataset.supersession",
               "dataset.validity_windows"]
POOLS = {"smartvector_pool1": "1", "smartvector_pool2": "2", "smartvector_pool5": "5",
         "smartvector_pool10": "10", "smartvector": "50", "smartvector_pool_all": "all"}


def _paired(pred: pd.DataFrame, a: str, b: str) -> tuple[float, float, float, float, float]:
    """Accuracy of ``a`` and ``b`` on the same queries, and the mean difference ``a - b``
    with a 95% bootstrap CI clustered over (seed, topic)."""
    key = ["seed", "query_id"]
    x = pred[pred.method == a].set_index(key)
    y = pred[pred.method == b].set_index(key).reindex(x.index)
    fa = x["grade"].eq("correct").to_numpy(float)
    fb = y["grade"].eq("correct").to_numpy(float)
    topic = x["topic"] if "topic" in x.columns else pd.Series(x.index.get_level_values(1),
                                                              index=x.index)
    clusters = (x.index.get_level_values(0).astype(str) + "|" + topic.astype(str)).to_numpy()
    d, lo, hi = cluster_rate_ci(fa - fb, clusters, n_boot=1000, seed=0)
    return float(fa.mean()), float(fb.mean()), d, lo, hi


#: regime-map columns beside SmartVector's pools: our designs and the paper's own code
OWN_LABELS = {"smartvector_v2": "v2", "smartvector_v3": "v3", "paper_code": "paper code"}


def regime_map(store: Store, out: Path) -> dict[str, str]:
    """SmartVector (six pools) and v2 minus plain cosine and minus latest_only, per regime:
    ``regime_map.csv``, ``regime_map.png`` and the report's tables."""
    pred = _pooled(store, "paper_regime_map")
    if pred.empty:
        return {}
    rows = []
    for regime, part in pred.groupby(REGIME_KEYS, sort=True):
        timing, rate, sup, windows = regime
        seeds = part["seed"].nunique()
        for m in [*POOLS, *OWN_LABELS]:
            if m not in set(part.method):
                continue
            acc, plain, dp, dp_lo, dp_hi = _paired(part, m, "plain_cosine")
            _, latest, dl, dl_lo, dl_hi = _paired(part, m, "latest_only")
            rows.append({"query_timing": timing, "rumor_rate": float(rate),
                         "supersession": sup, "validity_windows": windows, "seeds": seeds,
                         "method": m, "pool": POOLS.get(m) or OWN_LABELS[m], "accuracy": acc,
                         "plain_cosine": plain, "latest_only": latest,
                         "minus_plain": dp, "minus_plain_lo": dp_lo, "minus_plain_hi": dp_hi,
                         "minus_latest": dl, "minus_latest_lo": dl_lo,
                         "minus_latest_hi": dl_hi})
    df = pd.DataFrame(rows)
    df.to_csv(out / "regime_map.csv", index=False, float_format="%.4f")
    _plot_regime_map(df, out / "regime_map.png")
    show = df.copy()
    show["regime"] = [f"{t} / rumors {r:g} / {s}{'' if w in (True, 'True') else ' (no windows)'}"
                      for t, r, s, w in zip(show.query_timing, show.rumor_rate,
                                            show.supersession, show.validity_windows,
                                            strict=True)]
    show["cell"] = [f"{100 * a:.0f}% ({100 * d:+.0f} [{100 * lo:+.0f}, {100 * hi:+.0f}])"
                    for a, d, lo, hi in zip(show.accuracy, show.minus_plain, show.minus_plain_lo,
                                            show.minus_plain_hi, strict=True)]
    wide = show.pivot(index="regime", columns="pool", values="cell")
    wide = wide[[c for c in ["1", "2", "5", "10", "50", "all", *OWN_LABELS.values()]
                 if c in wide.columns]]
    base = show.drop_duplicates("regime").set_index("regime")[["plain_cosine", "latest_only"]]
    wide.insert(0, "latest_only", [f"{100 * v:.0f}%" for v in base.loc[wide.index,
                                                                      "latest_only"]])
    wide.insert(0, "plain_cosine", [f"{100 * v:.0f}%" for v in base.loc[wide.index,
                                                                       "plain_cosine"]])
    made = {"regime_map": write_table(wide.reset_index(), out, "regime_map_table")}
    crit = v2_criteria(pred)
    if not crit.empty:
        made["v2_criteria"] = write_table(crit, out, "v2_criteria")
    return made


def _kind_acc(part: pd.DataFrame, method: str, kind: str) -> float:
    sub = part[(part.method == method) & (part.kind == kind)]
    return float(sub["grade"].eq("correct").mean()) if len(sub) else float("nan")


def v2_criteria(pred: pd.DataFrame, v2: str = "smartvector_v2") -> pd.DataFrame:
    """Per regime, the four done-when checks of SmartVector v2 on the test seeds: current
    queries vs ``latest_only``, as-of queries vs ``lifecycle_only``, the on-topic
    contradicted rate vs ``latest_only``'s, and overall vs the best other method (the
    references excluded) within the half-width of the clustered CI of their difference."""
    rows = []
    for regime, part in pred.groupby(REGIME_KEYS, sort=True):
        if v2 not in set(part.method):
            continue
        others = [m for m in dict.fromkeys(part.method) if m != v2 and m not in REFERENCES]
        acc = {m: float(part[part.method == m]["grade"].eq("correct").mean()) for m in others}
        best = max(acc, key=acc.get)
        a, b, d, lo, hi = _paired(part, v2, best)
        half = (hi - lo) / 2
        contr = {m: float(part[part.method == m]["grade"].eq("contradicted").mean())
                 for m in (v2, "latest_only")}
        cur = (_kind_acc(part, v2, "current"), _kind_acc(part, "latest_only", "current"))
        asof = (_kind_acc(part, v2, "as_of"), _kind_acc(part, "lifecycle_only", "as_of"))
        timing, rate, sup, windows = regime
        rows.append({
            "regime": f"{timing} / rumors {float(rate):g} / {sup}"
                      f"{'' if windows in (True, 'True') else ' (no windows)'}",
            "current: v2 vs latest_only": f"{100 * cur[0]:.1f} vs {100 * cur[1]:.1f}",
            "as_of: v2 vs lifecycle_only": f"{100 * asof[0]:.1f} vs {100 * asof[1]:.1f}",
            "contradicted: v2 vs latest_only": f"{100 * contr[v2]:.1f} vs "
                                               f"{100 * contr['latest_only']:.1f}",
            "overall: v2 vs best other": f"{100 * a:.1f} vs {100 * b:.1f} ({best})",
            "difference [95% CI]": f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]",
            "all four met": "yes" if (cur[0] >= cur[1] and asof[0] >= asof[1]
                                      and contr[v2] <= contr["latest_only"]
                                      and a >= b - half) else "no"})
    return pd.DataFrame(rows)


def _plot_regime_map(df: pd.DataFrame, path: Path) -> None:
    import matplotlib.pyplot as plt

    pools = [p for p in ["1", "2", "5", "10", "50", "all", *OWN_LABELS.values()]
             if p in set(df["pool"])]
    df = df.assign(regime=[f"{t}/r{r:g}/{s[:3]}{'' if w in (True, 'True') else '-nw'}"
                           for t, r, s, w in zip(df.query_timing, df.rumor_rate,
                                                 df.supersession, df.validity_windows,
                                                 strict=True)])
    regimes = sorted(df["regime"].unique())
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.28 * len(regimes) + 2), sharey=True)
    for ax, col, title in ((axes[0], "minus_plain", "SmartVector minus plain cosine"),
                           (axes[1], "minus_latest", "SmartVector minus latest_only")):
        grid = df.pivot(index="regime", columns="pool", values=col).reindex(
            index=regimes, columns=pools) * 100
        im = ax.imshow(grid.to_numpy(), cmap="RdBu", vmin=-60, vmax=60, aspect="auto")
        ax.set_xticks(range(len(pools)), [p if p in OWN_LABELS.values() else f"pool {p}"
                                        for p in pools],
                      rotation=45)
        ax.set_yticks(range(len(regimes)), regimes, fontsize=7)
        ax.set_title(title + " (points)")
        for (i, j), v in np.ndenumerate(grid.to_numpy()):
            if np.isfinite(v):
                ax.text(j, i, f"{v:+.0f}", ha="center", va="center", fontsize=6)
    fig.colorbar(im, ax=axes, shrink=0.6)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _fig(h: float = 4.0, w: float = 7.0, ncols: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=150)
    axes = fig.subplots(1, ncols)
    return fig, axes


def _plot_ablation(ab: pd.DataFrame, path: Path) -> None:
    fig, ax = _fig(h=0.45 * len(ab) + 1.2)
    y = np.arange(len(ab))[::-1]
    err = np.vstack([ab["_acc"] - ab["_lo"], ab["_hi"] - ab["_acc"]]) * 100
    ax.barh(y, ab["_acc"] * 100, xerr=err, color="#4c72b0", capsize=3)
    ax.set_yticks(y, ab["variant"])
    ax.set_xlabel("Top-1 accuracy (%), 95% bootstrap CI, 5 seeds pooled")
    ax.set_title("Ablation: SmartVector without one signal, and each signal alone")
    ax.set_xlim(0, 100)
    fig.tight_layout()
    fig.savefig(path)


def _plot_robustness(df: pd.DataFrame, path: Path) -> None:
    fig, axes = _fig(h=4.0, w=13.0, ncols=3)
    for ax, (col, label) in zip(axes, (("top1_accuracy", "Top-1 accuracy (%)"),
                                       ("stale_rate", "Stale-answer rate (%)"),
                                       ("contradicted_rate", "Contradicted rate (%)")),
                                strict=True):
        for m, sub in df.groupby("method", sort=True):
            x = sub["rate"] * 100
            ax.plot(x, sub[col] * 100, marker="o", label=m)
            ax.fill_between(x, sub[f"{col}_ci_lo"] * 100, sub[f"{col}_ci_hi"] * 100, alpha=0.15)
        ax.set_xlabel("Injected-contradiction rate (% of topics with a rumor)")
        ax.set_ylabel(label)
        ax.set_ylim(0, 100)
        ax.set_xticks([0, 25, 50, 75])
    axes[0].legend(fontsize=7)
    fig.suptitle("Robustness to injected contradictions (5 seeds pooled, 95% CI bands)")
    fig.tight_layout()
    fig.savefig(path)


def _plot_feedback(df: pd.DataFrame, path: Path) -> None:
    fig, ax = _fig()
    for (rate, m), sub in df.groupby(["feedback rate", "method"], sort=True):
        if m != "smartvector" and rate > 0:  # feedback does not change these rankings much
            continue
        ax.plot([1, 2, 3, 4], sub[["Q1", "Q2", "Q3", "Q4"]].to_numpy()[0] * 100, marker="o",
                label=f"{m}, feedback on {rate:.0%} of queries")
    ax.set_xticks([1, 2, 3, 4], ["1st", "2nd", "3rd", "4th"])
    ax.set_xlabel("Chronological quarter of the queries")
    ax.set_ylabel("Top-1 accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy as simulated feedback accumulates (5 seeds pooled)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


def _plot_reembed(df: pd.DataFrame, path: Path) -> None:
    fig, ax = _fig()
    labels = {"full_reindex": "full re-index (paragraph chunks)",
              "full_reindex_window": "full re-index (500-char windows)",
              "hash_dedup_window": "hash-deduplicated (500-char windows)",
              "hash_dedup_paragraph": "hash-deduplicated (paragraph chunks)",
              "surgical": "SmartVector surgical update"}
    for col, label in labels.items():
        if col in df:
            dashed = col == "hash_dedup_paragraph"
            ax.plot(df["paragraphs"], df[col], marker="s" if dashed else "o",
                    linestyle="--" if dashed else "-", markersize=9 if dashed else 6,
                    label=label + (" (= surgical)" if dashed else ""), zorder=3 - dashed)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Document length (paragraphs)")
    ax.set_ylabel("Chunks embedded per one-word edit")
    ax.set_title("Re-embedding cost of a one-word edit vs document length")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)


# ----------------------------------------------------------------------------- report
def verdict(store: Store, out: Path) -> dict[str, str]:
    """The pre-registered verdict on v2 and v3 (:mod:`experiments.studies.verdict_report`)."""
    from experiments.studies.verdict_report import build

    return build(store, out)


def refresh_report(report: Path, tables: dict[str, str]) -> None:
    """Replace the text between ``<!-- table:NAME -->`` and ``<!-- /table:NAME -->``."""
    if not report.exists():
        report.write_text("# Paper reproduction\n\n" + "".join(
            f"## {n}\n\n<!-- table:{n} -->\n<!-- /table:{n} -->\n\n" for n in tables))
    text = report.read_text()
    for name, md in tables.items():
        pattern = re.compile(rf"(<!-- table:{name} -->\n).*?(<!-- /table:{name} -->)", re.S)
        text = pattern.sub(lambda m, md=md: m.group(1) + md + "\n" + m.group(2), text)
    report.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-root", default="outputs",
                        help="where the studies' results directories are (default: outputs)")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = Store(Path(args.results_root))
    tables: dict[str, str] = {}
    for build in (table1, regime_map, real_corpora, robustness, time_travel, feedback, sensitivity,
                  authority, weights, reembed_length, verdict):
        made = build(store, out)
        print(f"{build.__name__}: {', '.join(made) or 'no finished runs'}")
        tables.update(made)
    refresh_report(out / "REPORT.md", tables)
    print(f"wrote {len(tables)} tables and the figures to {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
