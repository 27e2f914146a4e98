"""Evaluation metrics for the benchmark: rates with bootstrap CIs, calibration, paired tests.

Definitions (N queries; ``conf`` a confidence in [0, 1], ``correct`` a per-query boolean):

* **Rate CI** -- mean of per-query flags with a percentile bootstrap interval: resample the
  queries with replacement ``n_boot`` times, take the ``alpha/2`` and ``1 - alpha/2``
  percentiles of the resampled means.
* **ECE** (expected calibration error) -- ``sum_b (n_b / N) * |acc_b - conf_b|`` over the
  non-empty bins, with ``acc_b`` the fraction correct and ``conf_b`` the mean confidence in
  bin ``b``.

  - ``"uniform"``: ``n_bins`` equal-width bins ``[i/n, (i+1)/n)`` on [0, 1], the last one
    closed, so 0.0 falls in the first bin and 1.0 in the last.
  - ``"quantile"`` (equal mass): sort by confidence (stable sort) and cut the order into
    ``n_bins`` contiguous groups with ``np.array_split`` (sizes differ by at most one, the
    larger groups first). Tied confidences on a group boundary stay split by sort order.

  Confidences outside [0, 1] (or NaN) raise ``ValueError``: map scores to [0, 1] first.
* **Brier score** -- ``mean((conf - correct) ** 2)``.
* **McNemar** -- exact paired test on per-query booleans of two methods: ``b`` = A right and
  B wrong, ``c`` = A wrong and B right, two-sided ``binomtest(b, b + c, 0.5)`` p-value
  (1.0 when ``b + c == 0``).
* **Clustered rate CI** -- the same percentile bootstrap, but resampling whole clusters
  (e.g. ``(seed, topic)`` pairs) with replacement, so queries that share a cluster are not
  treated as independent; the resampled rate is the flags' mean over the drawn clusters'
  queries (a ratio estimator: clusters of different sizes weigh by their size).
* **Seed-level paired test** -- per-seed accuracy difference between two methods; a two-sided
  exact sign-flip (permutation) test of mean difference 0 over the seeds (all ``2^n`` sign
  assignments up to 20 seeds), plus a paired t-test p-value and the mean difference with a
  t interval. Seeds, not queries, are the independent units.
* **Percentiles** -- ``numpy.percentile`` with linear interpolation.

Empty inputs give NaN rather than an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

Strategy = Literal["uniform", "quantile"]

_BOOT_CHUNK = 1 << 22  # resampled indices held in memory at once (n_boot * n is split up)
_TABLE_COLUMNS = ["bin_lo", "bin_hi", "count", "mean_confidence", "accuracy"]


def _as_bool(values: ArrayLike, name: str) -> np.ndarray:
    """1-D boolean array from booleans or 0/1 values."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype != bool:
        if not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must be booleans or 0/1")
        arr = arr.astype(bool)
    return arr


def _as_pair(confidences: ArrayLike, correct: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validated (confidence in [0, 1], correct flag) arrays of equal length."""
    conf = np.asarray(confidences, dtype=float)
    if conf.ndim != 1:
        raise ValueError(f"confidences must be 1-D, got shape {conf.shape}")
    y = _as_bool(correct, "correct")
    if len(conf) != len(y):
        raise ValueError(f"length mismatch: {len(conf)} confidences, {len(y)} labels")
    if not ((conf >= 0.0) & (conf <= 1.0)).all():
        raise ValueError("confidences must lie in [0, 1] (map scores to [0, 1] first)")
    return conf, y


def rate_ci(
    flags: ArrayLike, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float, float]:
    """(mean, lo, hi): mean of per-query flags and its percentile bootstrap CI over queries."""
    x = np.asarray(flags, dtype=float).ravel()
    n = len(x)
    if n == 0:
        return (float("nan"),) * 3
    if n_boot < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"need n_boot >= 1 and 0 < alpha < 1, got {n_boot}, {alpha}")
    rng = np.random.Generator(np.random.PCG64(seed))
    means = np.empty(n_boot)
    rows = max(1, _BOOT_CHUNK // n)  # resamples per vectorised batch, bounds memory
    for start in range(0, n_boot, rows):
        stop = min(start + rows, n_boot)
        means[start:stop] = x[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(x.mean()), float(lo), float(hi)


def cluster_rate_ci(
    flags: ArrayLike, clusters: ArrayLike, n_boot: int = 2000, alpha: float = 0.05,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(mean, lo, hi): mean of per-query flags and its percentile bootstrap CI over clusters
    (resampled with replacement; each drawn cluster brings all its queries)."""
    x = np.asarray(flags, dtype=float).ravel()
    cl = np.asarray(clusters).ravel()
    if len(cl) != len(x):
        raise ValueError(f"length mismatch: {len(x)} flags, {len(cl)} cluster labels")
    if len(x) == 0:
        return (float("nan"),) * 3
    if n_boot < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"need n_boot >= 1 and 0 < alpha < 1, got {n_boot}, {alpha}")
    _, ids = np.unique(cl, return_inverse=True)
    k = int(ids.max()) + 1
    sums = np.bincount(ids, weights=x, minlength=k)
    sizes = np.bincount(ids, minlength=k).astype(float)
    rng = np.random.Generator(np.random.PCG64(seed))
    draws = rng.integers(0, k, size=(n_boot, k))
    means = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    lo, hi = np.percentile(means, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return float(x.mean()), float(lo), float(hi)


def seed_paired_test(a: Mapping[object, float], b: Mapping[object, float],
                     alpha: float = 0.05) -> dict[str, float]:
    """Paired comparison of two methods' per-seed rates (``b - a``) over the seeds both
    have: mean difference, its t interval, the exact sign-flip p-value and the paired t-test
    p-value (NaN where undefined)."""
    from itertools import product

    from scipy import stats

    seeds = sorted(set(a) & set(b), key=str)
    d = np.array([b[s] - a[s] for s in seeds], dtype=float)
    n = len(d)
    out = {"seeds": float(n), "mean_diff": float(d.mean()) if n else float("nan"),
           "ci_lo": float("nan"), "ci_hi": float("nan"), "p_sign_flip": float("nan"),
           "p_ttest": float("nan")}
    if n == 0:
        return out
    if n <= 20:
        obs = abs(d.sum())
        signs = np.array(list(product((1.0, -1.0), repeat=n)))
        out["p_sign_flip"] = float(np.mean(np.abs(signs @ d) >= obs - 1e-12))
    if n >= 2:
        sd = d.std(ddof=1)
        if sd > 0:
            half = stats.t.ppf(1 - alpha / 2, n - 1) * sd / np.sqrt(n)
            out["ci_lo"], out["ci_hi"] = float(d.mean() - half), float(d.mean() + half)
            out["p_ttest"] = float(stats.ttest_rel([b[s] for s in seeds],
                                                   [a[s] for s in seeds]).pvalue)
        else:
            out["ci_lo"] = out["ci_hi"] = float(d.mean())
            out["p_ttest"] = 1.0 if d.mean() == 0 else 0.0
    return out


def _bin_ids(conf: np.ndarray, n_bins: int, strategy: Strategy) -> np.ndarray:
    """Bin index of every confidence (see the module docstring for both strategies)."""
    if strategy == "uniform":
        edges = np.arange(n_bins + 1) / n_bins  # i/n exactly rounded: 0.3 is an edge of 10
        return np.minimum(np.searchsorted(edges, conf, side="right") - 1, n_bins - 1)
    if strategy == "quantile":
        ids = np.empty(len(conf), dtype=np.intp)
        order = np.argsort(conf, kind="stable")
        for b, group in enumerate(np.array_split(order, n_bins)):
            ids[group] = b
        return ids
    raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")


def reliability_table(
    confidences: ArrayLike,
    correct: ArrayLike,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
) -> pd.DataFrame:
    """Per-bin count, mean confidence and accuracy.

    Uniform: one row per bin, edges ``i/n_bins``; empty bins have count 0 and NaN means.
    Quantile: one row per non-empty group, ``bin_lo``/``bin_hi`` its smallest/largest
    confidence (groups are empty only when there are fewer queries than bins).
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    conf, y = _as_pair(confidences, correct)
    ids = _bin_ids(conf, n_bins, strategy)
    count = np.bincount(ids, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(ids, weights=conf, minlength=n_bins) / count
        accuracy = np.bincount(ids, weights=y, minlength=n_bins) / count
    if strategy == "uniform":
        lo, hi = np.arange(n_bins) / n_bins, np.arange(1, n_bins + 1) / n_bins
    else:
        lo, hi = np.full(n_bins, np.nan), np.full(n_bins, np.nan)
        np.fmin.at(lo, ids, conf)
        np.fmax.at(hi, ids, conf)
    table = pd.DataFrame(
        dict(zip(_TABLE_COLUMNS, [lo, hi, count, mean_conf, accuracy], strict=True))
    )
    if strategy == "quantile":
        table = table[table["count"] > 0].reset_index(drop=True)
    return table


def _ece_from_table(table: pd.DataFrame) -> float:
    n = table["count"].sum()
    if n == 0:
        return float("nan")
    gap = (table["accuracy"] - table["mean_confidence"]).abs()
    return float(np.nansum(table["count"] / n * gap))


def ece(
    confidences: ArrayLike,
    correct: ArrayLike,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
) -> float:
    """Expected calibration error ``sum_b (n_b/N) |acc_b - conf_b|``; NaN for empty input."""
    return _ece_from_table(reliability_table(confidences, correct, n_bins, strategy))


def brier(confidences: ArrayLike, correct: ArrayLike) -> float:
    """Brier score ``mean((conf - correct)^2)`` (equals sklearn's ``brier_score_loss``)."""
    conf, y = _as_pair(confidences, correct)
    if len(conf) == 0:
        return float("nan")
    return float(np.mean((conf - y) ** 2))


def mcnemar(correct_a: ArrayLike, correct_b: ArrayLike) -> dict[str, int | float]:
    """Exact McNemar test: {"b": A right & B wrong, "c": A wrong & B right, "p_value"}."""
    a, b_ = _as_bool(correct_a, "correct_a"), _as_bool(correct_b, "correct_b")
    if len(a) != len(b_):
        raise ValueError(f"length mismatch: {len(a)} vs {len(b_)}")
    b = int(np.count_nonzero(a & ~b_))
    c = int(np.count_nonzero(~a & b_))
    return {"b": b, "c": c, "p_value": binomial_two_sided_half(b, b + c)}


def binomial_two_sided_half(k: int, n: int) -> float:
    """Exact two-sided p-value of ``k`` successes in ``n`` fair coin flips (the exact McNemar
    p-value; 1.0 for ``n == 0``): ``min(1, 2 P(X <= min(k, n - k)))``, summed in integers and
    divided once, so correctly rounded. It equals ``scipy.stats.binomtest(k, n).pvalue`` up to
    scipy's own rounding (~3e-14 relative), without importing scipy.stats (~0.5 s)."""
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
    return min(1.0, 2 * tail / 2 ** n)


def percentiles(values_ms: ArrayLike, qs: Iterable[float] = (50, 95)) -> dict[str, float]:
    """{"p50": .., "p95": ..}: linear-interpolated percentiles; NaN for empty input."""
    qs = list(qs)
    x = np.asarray(values_ms, dtype=float).ravel()
    vals = np.percentile(x, qs) if len(x) else np.full(len(qs), np.nan)
    return {f"p{q:g}": float(v) for q, v in zip(qs, vals, strict=True)}


#: the run's reliability plot, in its output directory
RELIABILITY_PLOT = "reliability.png"


def plot_predictions_reliability(pred: pd.DataFrame, path: str | os.PathLike[str],
                                 title: str) -> Path:
    """The run's reliability plot from its predictions (a ``predictions.csv`` frame: columns
    ``method``, ``probability``, ``grade``): plain cosine and SmartVector, or the first two
    methods present."""
    methods = list(dict.fromkeys(pred["method"]))
    shown = [m for m in ("plain_cosine", "smartvector") if m in methods] or methods[:2]
    curves = {m: (pred.loc[pred["method"] == m, "probability"].to_numpy(),
                  (pred.loc[pred["method"] == m, "grade"] == "correct").to_numpy())
              for m in shown}
    return plot_reliability(curves, path, title=title)


def plot_reliability(
    curves: Mapping[str, tuple[ArrayLike, ArrayLike]],
    path: str | os.PathLike[str],
    n_bins: int = 10,
    title: str = "Reliability diagram",
) -> Path:
    """Reliability diagram (uniform bins, markers sized by count) and confidence histogram.

    Draws on a bare ``matplotlib.figure.Figure`` (Agg rendering, no pyplot global state) and
    saves a 150-dpi PNG; returns its path.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 7.5), layout="constrained")
    ax, hist_ax = fig.subplots(2, 1, height_ratios=[3, 1])
    ax.plot([0, 1], [0, 1], ls="--", color="grey", lw=1, label="Perfect calibration")
    edges = np.arange(n_bins + 1) / n_bins
    for name, (conf, correct) in curves.items():
        table = reliability_table(conf, correct, n_bins, "uniform")
        score = _ece_from_table(table)
        filled = table[table["count"] > 0]
        (line,) = ax.plot(
            filled["mean_confidence"],
            filled["accuracy"],
            lw=1.5,
            clip_on=False,
            label=f"{name} (ECE = {score:.3f})",
        )
        if len(filled):
            sizes = 15 + 185 * filled["count"] / filled["count"].max()
            ax.scatter(
                filled["mean_confidence"],
                filled["accuracy"],
                s=sizes,
                color=line.get_color(),
                alpha=0.8,
                edgecolors="white",
                linewidths=0.5,
                zorder=3,
                clip_on=False,
            )
        hist_ax.hist(
            np.asarray(conf, dtype=float),
            bins=edges,
            histtype="step",
            lw=1.5,
            color=line.get_color(),
        )
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1),
        title=title,
        xlabel="Mean predicted confidence (top-1 score)",
        ylabel="Observed accuracy",
    )
    ax.legend(
        loc="upper left",
        fontsize="small",
        title="marker area ~ bin count",
        title_fontsize="x-small",
    )
    hist_ax.set(xlim=(0, 1), xlabel="Confidence (top-1 score)", ylabel="Queries")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150, format="png")
    return out
