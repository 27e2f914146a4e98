"""Report building blocks on hand-made predictions: clustered CIs, seed-level tests,
per-kind and per-seed tables, dev-fitted calibration and the regime map."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.protocol.metrics import cluster_rate_ci, ece, seed_paired_test
from experiments.studies import figures


def test_cluster_ci_resamples_whole_clusters() -> None:
    # two clusters, all-correct and all-wrong: a resample is 0, 1/2 or 1 (sizes are equal)
    flags = [1, 1, 1, 0, 0, 0]
    mean, lo, hi = cluster_rate_ci(flags, ["a", "a", "a", "b", "b", "b"], n_boot=2000)
    assert mean == 0.5 and lo == 0.0 and hi == 1.0
    # one query per cluster: the same as resampling queries, so a narrower interval
    _, lo2, hi2 = cluster_rate_ci(flags, list("abcdef"), n_boot=2000)
    assert 0.0 < lo2 < 0.5 < hi2 < 1.0
    with pytest.raises(ValueError, match="length mismatch"):
        cluster_rate_ci([1, 0], ["a"])


def test_seed_paired_test_values() -> None:
    a = {0: 0.5, 1: 0.5, 2: 0.5, 3: 0.5}
    b = {0: 0.6, 1: 0.6, 2: 0.6, 3: 0.4}
    t = seed_paired_test(a, b)
    assert t["seeds"] == 4 and t["mean_diff"] == pytest.approx(0.05)
    # sign flips of (+.1, +.1, +.1, -.1): |sum| >= .2 in 10 of the 16 assignments
    assert t["p_sign_flip"] == pytest.approx(10 / 16)
    assert t["ci_lo"] < 0 < t["ci_hi"]
    # the same gain on every seed: every other sign assignment gives a smaller sum
    t = seed_paired_test({s: 0.5 for s in range(5)}, {s: 0.6 for s in range(5)})
    assert t["p_sign_flip"] == pytest.approx(2 / 32)


def _pred(rng: np.random.Generator, method: str, acc: float, seeds: int = 4,
          n: int = 40, regime: dict | None = None) -> pd.DataFrame:
    rows = []
    for s in range(seeds):
        for i in range(n):
            ok = rng.random() < acc
            rows.append({"seed": str(s), "query_id": f"q{i}", "method": method,
                         "kind": "current" if i % 2 else "as_of", "topic": f"t{i % 8}",
                         "grade": "correct" if ok else "wrong",
                         "probability": 0.9 if method == "overconfident" else acc,
                         **(regime or {})})
    return pd.DataFrame(rows)


def test_breakdowns_write_kind_seed_and_test_tables(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    pred = pd.concat([_pred(rng, "plain_cosine", 0.4), _pred(rng, "latest_only", 0.7),
                      _pred(rng, "smartvector", 0.6)], ignore_index=True)
    tables = figures.breakdowns(pred, tmp_path, "t")
    assert set(tables) == {"t_by_kind", "t_by_seed", "t_seed_tests"}
    by_seed = pd.read_csv(tmp_path / "t_by_seed.csv")
    assert list(by_seed["method"]) == ["plain_cosine", "latest_only", "smartvector"]
    assert {"seed 0", "seed 3", "mean", "sd"} <= set(by_seed.columns)
    tests = pd.read_csv(tmp_path / "t_seed_tests.csv")
    row = tests[(tests.method == "latest_only") & (tests.vs == "plain_cosine")
                & (tests.queries == "all")].iloc[0]
    assert row["seeds"] == 4 and row["mean difference"].startswith("+")
    assert "clustered" in pd.read_csv(tmp_path / "t_by_kind.csv").iloc[0, 1]


def test_calibration_fitted_on_dev_lowers_test_ece() -> None:
    rng = np.random.default_rng(1)
    dev, test = _pred(rng, "overconfident", 0.5), _pred(rng, "overconfident", 0.5)
    raw = ece(test["probability"], test["grade"].eq("correct"), 10, "uniform")
    cal = figures.calibrate(dev, test)["overconfident"]
    assert raw == pytest.approx(0.9 - test["grade"].eq("correct").mean(), abs=1e-9)
    assert cal < 0.1 < raw
    assert figures.calibrate(pd.DataFrame(), test) == {}


class _FakeStore:
    def __init__(self, pred: pd.DataFrame) -> None:
        self.pred = pred

    def parents(self, experiment: str) -> list:
        return ["run"] if experiment == "paper_regime_map" else []

    def predictions(self, run) -> pd.DataFrame:
        return self.pred


def test_regime_map_differences_per_regime(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    parts = []
    for timing in ("quiet", "after_change"):
        reg = {"dataset.query_timing": timing, "dataset.contradiction_rate": "0.25",
               "dataset.supersession": "versions", "dataset.validity_windows": "True"}
        good = timing == "after_change"
        parts += [_pred(rng, "plain_cosine", 0.3, regime=reg),
                  _pred(rng, "latest_only", 0.7, regime=reg),
                  _pred(rng, "smartvector", 0.8 if good else 0.2, regime=reg),
                  _pred(rng, "smartvector_pool1", 0.7, regime=reg)]
    made = figures.regime_map(_FakeStore(pd.concat(parts, ignore_index=True)), tmp_path)
    assert "regime_map" in made
    df = pd.read_csv(tmp_path / "regime_map.csv")
    sv = df[df.method == "smartvector"].set_index("query_timing")
    assert sv.loc["after_change", "minus_plain"] > 0.3 > -0.0 > sv.loc["quiet", "minus_plain"]
    for _, r in df.iterrows():
        assert r.minus_plain_lo <= r.minus_plain <= r.minus_plain_hi
        assert r.minus_plain == pytest.approx(r.accuracy - r.plain_cosine, abs=2e-4)
    assert (tmp_path / "regime_map.png").read_bytes()[:4] == b"\x89PNG"


def test_pool_order_follows_the_swept_params_not_the_fingerprint() -> None:
    """The pool (which the bootstraps resample) is ordered by the swept params, numbers as
    numbers, so a fingerprint that changes with the configuration's keys moves no interval."""
    from types import SimpleNamespace

    from experiments.studies.figures import pool_order

    def run(seed: str, rate: str, fp: str, **extra: str):
        params = {"seed": seed, "dataset.contradiction_rate": rate, "n_boot": "200", **extra}
        return SimpleNamespace(data=SimpleNamespace(params=params,
                                                    tags={"config_fingerprint": fp}))

    runs = [run("10", "0", "aaa"), run("2", "0.25", "bbb"), run("2", "0", "zzz"),
            run("2", "0", "ccc", **{"store.weights.semantic": "1"})]
    # by the params' names, then their values: rate 0 (seed 2, then with a weight, seed 10),
    # then rate 0.25; n_boot is not swept
    order = [r.data.tags["config_fingerprint"] for r in sorted(runs, key=pool_order)]
    assert order == ["zzz", "ccc", "aaa", "bbb"]
    # new fingerprints (a key added to every configuration), same order
    renamed = [run("10", "0", "111"), run("2", "0.25", "999"), run("2", "0", "555"),
               run("2", "0", "000", **{"store.weights.semantic": "1"})]
    assert [r.data.params["seed"] for r in sorted(renamed, key=pool_order)] == [
        r.data.params["seed"] for r in sorted(runs, key=pool_order)]
    # a value that is not a number sorts by its text
    assert pool_order(run("2", "0", "x", **{"dataset.query_timing": "quiet"})) > \
        pool_order(run("2", "0", "y", **{"dataset.query_timing": "after_change"}))
