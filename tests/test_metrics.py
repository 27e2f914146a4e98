"""Tests for experiments.protocol.metrics: hand-computed values, edge cases, library agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest
from sklearn.metrics import brier_score_loss

from experiments.protocol.metrics import (
    binomial_two_sided_half,
    brier,
    ece,
    mcnemar,
    percentiles,
    plot_reliability,
    rate_ci,
    reliability_table,
)

CONF = [0.1, 0.4, 0.45, 0.8, 0.95, 1.0]
CORRECT = [0, 0, 1, 1, 0, 1]


# ---------------------------------------------------------------- ECE, hand-computed


@pytest.mark.parametrize(
    ("n_bins", "strategy", "expected"),
    [
        # uniform, 2 bins [0, .5) [.5, 1]:
        #   {.1 .4 .45}: conf .95/3 = .31667, acc 1/3 -> gap 1/60;  weight 3/6
        #   {.8 .95 1}:  conf 2.75/3 = .91667, acc 2/3 -> gap 1/4; weight 3/6
        #   ECE = (1/60 + 1/4) / 2 = 2/15 = 0.13333
        (2, "uniform", 2 / 15),
        # uniform, 3 bins [0, 1/3) [1/3, 2/3) [2/3, 1]:
        #   {.1}: gap |0 - .1| = .1, w 1/6;  {.4 .45}: gap |.5 - .425| = .075, w 2/6
        #   {.8 .95 1}: gap 1/4, w 3/6
        #   ECE = (.1 + .15 + .75) / 6 = 1/6
        (3, "uniform", 1 / 6),
        # quantile, 2 groups of 3: same groups as uniform with 2 bins -> 2/15
        (2, "quantile", 2 / 15),
        # quantile, 3 groups of 2: {.1 .4}: |0 - .25| = .25; {.45 .8}: |1 - .625| = .375;
        #   {.95 1}: |.5 - .975| = .475;  ECE = (.25 + .375 + .475) / 3 = 11/30
        (3, "quantile", 11 / 30),
    ],
)
def test_ece_hand_computed(n_bins: int, strategy: str, expected: float) -> None:
    assert ece(CONF, CORRECT, n_bins, strategy) == pytest.approx(expected)


def test_reliability_table_uniform_keeps_empty_bins() -> None:
    t = reliability_table(CONF, CORRECT, n_bins=10)
    assert list(t.columns) == ["bin_lo", "bin_hi", "count", "mean_confidence", "accuracy"]
    assert len(t) == 10
    assert t["count"].tolist() == [0, 1, 0, 0, 2, 0, 0, 0, 1, 2]
    assert t["bin_lo"].tolist() == pytest.approx([i / 10 for i in range(10)])
    assert t["bin_hi"].tolist() == pytest.approx([i / 10 for i in range(1, 11)])
    empty = t[t["count"] == 0]
    assert empty["mean_confidence"].isna().all() and empty["accuracy"].isna().all()
    assert t.loc[4, "mean_confidence"] == pytest.approx(0.425)
    assert t.loc[9, "accuracy"] == pytest.approx(0.5)
    # 10 bins: {.1}: .1, {.4 .45}: .075, {.8}: .2, {.95 1}: .475 -> (.1 + .15 + .2 + .95) / 6
    assert ece(CONF, CORRECT, 10) == pytest.approx(1.4 / 6)


def test_reliability_table_quantile_groups() -> None:
    t = reliability_table(CONF, CORRECT, n_bins=3, strategy="quantile")
    assert t["count"].tolist() == [2, 2, 2]
    assert t["bin_lo"].tolist() == pytest.approx([0.1, 0.45, 0.95])
    assert t["bin_hi"].tolist() == pytest.approx([0.4, 0.8, 1.0])
    assert t["accuracy"].tolist() == pytest.approx([0.0, 1.0, 0.5])
    # np.array_split: 7 items in 3 groups -> sizes 3, 2, 2; fewer items than bins -> no empties
    assert reliability_table(np.linspace(0, 1, 7), [1] * 7, 3, "quantile")["count"].tolist() == [
        3,
        2,
        2,
    ]
    assert len(reliability_table([0.2, 0.7], [1, 0], 5, "quantile")) == 2


def test_quantile_ties_split_by_stable_order() -> None:
    # four tied confidences, 2 groups: first two (in input order) vs last two
    t = reliability_table([0.5] * 4, [1, 1, 0, 0], n_bins=2, strategy="quantile")
    assert t["accuracy"].tolist() == [1.0, 0.0]
    assert ece([0.5] * 4, [1, 1, 0, 0], 2, "quantile") == pytest.approx(0.5)


def test_uniform_edge_bins() -> None:
    t = reliability_table([0.0, 1.0], [0, 1], n_bins=10)
    assert t.loc[0, "count"] == 1 and t.loc[9, "count"] == 1
    assert t["count"].sum() == 2
    assert ece([0.0, 1.0], [0, 1], 10) == 0.0
    # bins are closed on the left: a value on an inner edge goes to the upper bin
    assert reliability_table([0.5], [1], n_bins=2)["count"].tolist() == [0, 1]
    assert reliability_table([0.3], [1], n_bins=10)["count"].tolist()[3] == 1


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("bad", [-0.01, 1.01, float("nan")])
def test_out_of_range_confidence_raises(strategy: str, bad: float) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ece([0.5, bad], [1, 0], strategy=strategy)


def test_invalid_inputs_raise() -> None:
    with pytest.raises(ValueError, match="length"):
        ece([0.5, 0.6], [1])
    with pytest.raises(ValueError, match="0/1"):
        ece([0.5], [2])
    with pytest.raises(ValueError, match="strategy"):
        ece([0.5], [1], strategy="equal")
    with pytest.raises(ValueError, match="n_bins"):
        ece([0.5], [1], n_bins=0)


def test_ece_empty_is_nan() -> None:
    assert math.isnan(ece([], []))
    assert math.isnan(ece([], [], strategy="quantile"))


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_ece_synthetic_calibrated_and_miscalibrated(strategy: str) -> None:
    rng = np.random.default_rng(1)
    conf = rng.random(50_000)
    calibrated = rng.random(conf.size) < conf
    assert ece(conf, calibrated, 10, strategy) < 0.02
    # overconfident: confidence in [.5, 1] (mean .75) but a coin-flip accuracy -> ECE ~ .25
    over = 0.5 + 0.5 * conf
    coin = rng.random(conf.size) < 0.5
    assert ece(over, coin, 10, strategy) == pytest.approx(0.25, abs=0.02)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 12),
    st.sampled_from(["uniform", "quantile"]),
)
def test_ece_properties(pairs: list[tuple[float, bool]], n_bins: int, strategy: str) -> None:
    conf, correct = map(np.array, zip(*pairs, strict=True))
    e = ece(conf, correct, n_bins, strategy)
    assert 0.0 <= e <= 1.0 + 1e-12
    t = reliability_table(conf, correct, n_bins, strategy)
    assert t["count"].sum() == len(conf)
    # one bin: ECE is the gap between mean confidence and accuracy
    assert ece(conf, correct, 1, strategy) == pytest.approx(abs(conf.mean() - correct.mean()))


# ---------------------------------------------------------------- Brier


def test_brier_hand_value_and_sklearn() -> None:
    # (.01 + .16 + .3025 + .04 + .9025 + 0) / 6
    assert brier(CONF, CORRECT) == pytest.approx(1.415 / 6)
    rng = np.random.default_rng(2)
    conf = rng.random(500)
    y = rng.random(500) < 0.4
    assert brier(conf, y) == pytest.approx(brier_score_loss(y, conf))
    assert math.isnan(brier([], []))


# ---------------------------------------------------------------- McNemar


def _paired(b: int, c: int, both: int = 5, neither: int = 3) -> tuple[np.ndarray, np.ndarray]:
    a = [True] * b + [False] * c + [True] * both + [False] * neither
    other = [False] * b + [True] * c + [True] * both + [False] * neither
    return np.array(a), np.array(other)


def test_mcnemar_known_value() -> None:
    res = mcnemar(*_paired(10, 2))
    assert (res["b"], res["c"]) == (10, 2)
    # P(X >= 10 | n=12, p=.5) = (66 + 12 + 1) / 4096; two-sided doubles it: 79/2048
    assert res["p_value"] == pytest.approx(79 / 2048)
    assert res["p_value"] == pytest.approx(binomtest(10, 12, 0.5).pvalue)
    assert res["p_value"] == pytest.approx(0.0386, abs=1e-4)
    swapped = mcnemar(*_paired(10, 2)[::-1])
    assert (swapped["b"], swapped["c"]) == (2, 10)
    assert swapped["p_value"] == pytest.approx(res["p_value"])


def test_exact_binomial_p_matches_scipy_and_known_values() -> None:
    assert binomial_two_sided_half(10, 12) == 79 / 2048  # exactly, not approximately
    assert binomial_two_sided_half(0, 5) == 2 / 32
    assert binomial_two_sided_half(0, 0) == binomial_two_sided_half(3, 6) == 1.0
    assert binomial_two_sided_half(0, 1000) == 2.0 ** -999 > 0  # tiny, still exact
    for n in range(1, 160, 7):
        for k in range(n + 1):
            assert binomial_two_sided_half(k, n) == pytest.approx(
                binomtest(k, n, 0.5).pvalue, rel=1e-12)
    for k, n in ((-1, 3), (4, 3)):
        with pytest.raises(ValueError, match="0 <= k <= n"):
            binomial_two_sided_half(k, n)


def test_mcnemar_no_discordant_pairs_and_errors() -> None:
    assert mcnemar(*_paired(0, 0)) == {"b": 0, "c": 0, "p_value": 1.0}
    assert mcnemar([1, 0, 1], [True, False, True])["p_value"] == 1.0
    with pytest.raises(ValueError, match="length"):
        mcnemar([True, False], [True])


# ---------------------------------------------------------------- bootstrap CI


def test_rate_ci_contains_mean_and_is_deterministic() -> None:
    flags = np.random.default_rng(3).random(300) < 0.3
    mean, lo, hi = rate_ci(flags, seed=7)
    assert mean == pytest.approx(flags.mean())
    assert lo < mean < hi
    assert rate_ci(flags, seed=7) == (mean, lo, hi)
    assert rate_ci(flags, seed=8) != (mean, lo, hi)
    # percentile interval close to the normal approximation 1.96 * sqrt(p(1-p)/n)
    half = 1.96 * math.sqrt(mean * (1 - mean) / flags.size)
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.15)


def test_rate_ci_narrows_with_n() -> None:
    rng = np.random.default_rng(4)
    widths = []
    for n in (50, 500, 5000):  # n=5000 resamples in several vectorised batches
        _, lo, hi = rate_ci(rng.random(n) < 0.5, seed=0)
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2] > 0


def test_rate_ci_edge_cases() -> None:
    assert all(math.isnan(v) for v in rate_ci([]))
    assert rate_ci([True] * 20) == (1.0, 1.0, 1.0)
    assert rate_ci([False]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        rate_ci([True, False], alpha=1.5)


# ---------------------------------------------------------------- recall@k, percentiles


def test_percentiles() -> None:
    values = np.arange(1, 101)
    assert percentiles(values) == {"p50": pytest.approx(50.5), "p95": pytest.approx(95.05)}
    assert set(percentiles(values, (99, 99.9))) == {"p99", "p99.9"}
    out = percentiles([], (50, 95))
    assert set(out) == {"p50", "p95"} and all(math.isnan(v) for v in out.values())


# ---------------------------------------------------------------- plot


def test_plot_reliability_writes_png(tmp_path) -> None:
    rng = np.random.default_rng(5)
    conf = rng.random(400)
    curves = {
        "calibrated": (conf, rng.random(400) < conf),
        "overconfident": (0.5 + 0.5 * conf, rng.random(400) < 0.5),
        "empty": ([], []),
    }
    out = plot_reliability(curves, tmp_path / "sub" / "reliability.png", n_bins=10, title="t")
    assert out == tmp_path / "sub" / "reliability.png"
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


# ---------------------------------------------------------------- per query kind


def test_method_metrics_accuracy_per_kind_hand_computed():
    """Top-1 accuracy per query kind: each kind's share of correct answers, keyed in sorted
    order; a query with no kind counts overall but in no kind."""
    import pandas as pd

    from experiments.protocol.evaluate import method_metrics

    pred = pd.DataFrame({
        "grade": ["correct", "stale", "correct", "wrong", "correct", "correct", "stale"],
        "kind": ["time_travel", "current", "current", "changed", None, "time_travel",
                 "changed"],
        "first_correct_rank": [1, 0, 1, 0, 1, 1, 2],
        "probability": [0.9, 0.2, 0.7, 0.1, 0.8, 0.6, 0.3],
    })
    out = method_metrics(pred, n_boot=50)
    per_kind = {k: v for k, v in out.items() if k.startswith("top1_accuracy_")
                and "_ci_" not in k and "quarter" not in k}
    assert per_kind == {"top1_accuracy_changed": 0.0, "top1_accuracy_current": 0.5,
                        "top1_accuracy_time_travel": 1.0}
    assert list(per_kind) == sorted(per_kind)
    assert out["top1_accuracy"] == 4 / 7


def test_version_accuracy_given_the_document_hand_computed():
    """Among queries whose first own-document hit is within k, the share in force; the
    ranking metrics are plain means of their per-query values."""
    import pandas as pd

    from experiments.protocol.evaluate import method_metrics

    pred = pd.DataFrame({
        "grade": ["correct", "stale", "other_document", "wrong"], "kind": ["a"] * 4,
        "probability": [0.9, 0.5, 0.1, 0.2],
        "doc_rank": [1, 1, 0, 4], "doc_hit_in_force": [True, False, False, True],
        **{c: [1.0, 0.5, 0.0, 0.25] for c in ("ndcg_at_10", "recall_at_1", "recall_at_5",
                                              "recall_at_10", "mrr_at_10")},
        **{f"doc_recall_at_{k}": [1.0, 1.0, 0.0, float(k >= 4)] for k in (1, 5, 10)},
    })
    out = method_metrics(pred, n_boot=50)
    assert out["version_accuracy_at_1"] == 0.5 and out["doc_found_at_1"] == 2
    assert out["version_accuracy_at_5"] == 2 / 3 and out["doc_found_at_5"] == 3
    assert out["ndcg_at_10"] == pytest.approx(1.75 / 4)
    assert out["doc_recall_at_1"] == 0.5 and out["doc_recall_at_5"] == 0.75
    assert out["other_document_rate"] == 0.25 and out["wrong_rate"] == 0.25
    empty = method_metrics(pred.assign(doc_rank=0), n_boot=50)
    assert math.isnan(empty["version_accuracy_at_10"]) and empty["doc_found_at_10"] == 0
