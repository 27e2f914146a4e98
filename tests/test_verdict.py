"""The pre-registered verdict rule on hand-made predictions (no held-out data involved)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.studies.verdict import cell_verdict, classify, counts, verdict_table


def _pred(accuracies: dict[str, float], n_topics: int = 40, per_topic: int = 10,
          seed: int = 0) -> pd.DataFrame:
    """Predictions where each method is right on the first share of every topic's queries."""
    rows = []
    for method, acc in accuracies.items():
        for t in range(n_topics):
            for i in range(per_topic):
                rows.append({"seed": seed, "query_id": f"q{t}-{i}", "topic": f"t{t}",
                             "method": method,
                             "grade": "correct" if i < round(acc * per_topic) else "wrong"})
    return pd.DataFrame(rows)


def test_classify_by_the_interval_s_lower_end() -> None:
    assert classify(0.001) == "win"
    assert classify(0.0) == "within" and classify(-0.019) == "within"
    assert classify(-0.02) == "loss" and classify(-0.3) == "loss"


def test_best_other_excludes_references_and_ablations() -> None:
    pred = _pred({"smartvector_v2": 0.8, "latest_only": 0.6, "bm25_lifecycle": 0.7,
                  "ref_current_cosine": 0.95, "no_temporal": 0.9})
    v = cell_verdict(pred, "smartvector_v2")
    assert v["best other"] == "bm25_lifecycle" and v["other"] == pytest.approx(0.7)
    assert v["difference"] == pytest.approx(0.1) and v["verdict"] == "win"
    assert v["target met"]


def test_a_tie_is_within_the_margin_and_a_clear_gap_a_loss() -> None:
    tie = cell_verdict(_pred({"smartvector_v3": 0.7, "latest_only": 0.7}), "smartvector_v3")
    assert tie["difference"] == 0 and tie["verdict"] == "within" and tie["target met"]
    behind = cell_verdict(_pred({"smartvector_v3": 0.5, "latest_only": 0.7}),
                          "smartvector_v3")
    assert behind["verdict"] == "loss" and not behind["target met"]
    assert behind["hi"] < 0


def test_the_table_counts_every_cell() -> None:
    cells = {"a": _pred({"v": 0.9, "plain_cosine": 0.5}),
             "b": _pred({"v": 0.5, "plain_cosine": 0.5}),
             "c": _pred({"v": 0.2, "plain_cosine": 0.5})}
    table = verdict_table(cells, "v")
    assert list(table["cell"]) == ["a", "b", "c"]
    assert counts(table) == {"win": 1, "within": 1, "loss": 1}
    assert np.isfinite(table[["lo", "hi"]].to_numpy()).all()


def test_a_cell_without_the_design_is_an_error() -> None:
    with pytest.raises(ValueError, match="lacks 'v'"):
        cell_verdict(_pred({"plain_cosine": 0.5}), "v")
