"""Per-method figures from the prediction table: the top-1 grades' rates with bootstrap CIs,
the ranking metrics' means (their per-query values come from
:mod:`experiments.protocol.ranking`), document recall and version accuracy given the
document, calibration, paired McNemar tests against plain cosine, latency and throughput."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.protocol.metrics import brier, ece, mcnemar, percentiles, rate_ci
from experiments.protocol.ranking import CHUNK_MEASURES, DOC_MEASURES
from experiments.protocol.replay import ReplayResult

RATES = {"top1_accuracy": "correct", "stale_rate": "stale",
         "contradicted_rate": "contradicted", "wrong_rate": "wrong",
         "other_document_rate": "other_document"}
#: ranking metrics reported with a bootstrap CI (the others as means)
WITH_CI = ("ndcg_at_10", "doc_recall_at_5")
BASELINE = "plain_cosine"


def method_metrics(pred: pd.DataFrame, seed: int = 0, n_boot: int = 2000) -> dict[str, float]:
    """Deterministic quality figures of one method's predictions (one row per query)."""
    out: dict[str, float] = {"queries": float(len(pred))}
    for name, grade in RATES.items():
        mean, lo, hi = rate_ci(pred["grade"].to_numpy() == grade, n_boot=n_boot, seed=seed)
        out[name], out[f"{name}_ci_lo"], out[f"{name}_ci_hi"] = mean, lo, hi
    if "doc_rank" in pred.columns:  # (predictions made with the relevance labels)
        out.update(_ranking(pred, seed, n_boot))
    prob = pred["probability"].to_numpy(dtype=np.float64)
    correct = pred["grade"].to_numpy() == "correct"
    out["ece"] = ece(prob, correct, 10, "uniform")
    out["ece_equal_mass"] = ece(prob, correct, 10, "quantile")
    out["brier"] = brier(prob, correct)
    # accuracy over the chronological quarters of the queries (feedback accumulating)
    for i, part in enumerate(np.array_split(correct, 4), start=1):
        out[f"top1_accuracy_quarter{i}"] = float(part.mean()) if len(part) else float("nan")
    # per query kind, in sorted order, missing kinds left out (as a sorted groupby; its
    # splitting of the frame cost ten times these masks)
    codes, kinds = pd.factorize(pred["kind"], sort=True)
    for i, kind in enumerate(kinds):
        out[f"top1_accuracy_{kind}"] = float(correct[codes == i].mean())
    return out


def _ranking(pred: pd.DataFrame, seed: int, n_boot: int) -> dict[str, float]:
    """Means of the per-query ranking metrics, and version accuracy given the document at
    k: among the queries whose first hit from their own documents is in the top k (that
    count is ``doc_found_at_k``), the share whose first such hit is in force."""
    out: dict[str, float] = {}
    for name in (*CHUNK_MEASURES, *DOC_MEASURES):
        values = pred[name].to_numpy(dtype=np.float64)
        if name in WITH_CI:
            mean, lo, hi = rate_ci(values, n_boot=n_boot, seed=seed)
            out[name], out[f"{name}_ci_lo"], out[f"{name}_ci_hi"] = mean, lo, hi
        else:
            out[name] = float(values.mean()) if len(values) else float("nan")
    rank = pred["doc_rank"].to_numpy()
    in_force = pred["doc_hit_in_force"].to_numpy(dtype=bool)
    for k in (1, 5, 10):
        found = (rank >= 1) & (rank <= k)
        out[f"version_accuracy_at_{k}"] = float(in_force[found].mean()) if found.any() \
            else float("nan")
        out[f"doc_found_at_{k}"] = float(found.sum())
    return out


def timing_metrics(res: ReplayResult) -> dict[str, float]:
    """Wall-clock figures (not deterministic: kept apart from the quality figures)."""
    lat = percentiles(res.latencies_ms, (50, 95))
    return {
        "latency_p50_ms": lat["p50"], "latency_p95_ms": lat["p95"],
        "ingest_chunks_per_s": res.chunks_ingested / res.ingest_seconds
        if res.ingest_seconds > 0 else float("nan"),
    }


def paired_tests(pred: pd.DataFrame) -> dict[str, dict[str, float]]:
    """McNemar of every method against plain cosine on the same queries."""
    if BASELINE not in set(pred["method"]):
        return {}
    wide = pred.pivot(index="query_id", columns="method", values="grade") == "correct"
    out = {}
    for m in wide.columns:
        if m != BASELINE:
            t = mcnemar(wide[BASELINE].to_numpy(), wide[m].to_numpy())
            out[m] = {"mcnemar_b": float(t["b"]), "mcnemar_c": float(t["c"]),
                      "mcnemar_p": float(t["p_value"])}
    return out
