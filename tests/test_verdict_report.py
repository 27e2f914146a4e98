"""The verdict's tables (``experiments/studies/verdict_report.py``): the 27 distinct regimes
and the real corpora's ``chunk_context=none`` runs are the cells; calibrated ECE maps test
probabilities through the method's own development fit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from experiments.studies.verdict_report import REGIME_KEYS, calibrated_ece, cells, regime_name


def _synth(timing: str, rate: str, sup: str, windows: str) -> pd.DataFrame:
    return pd.DataFrame({"method": ["a"], "query_id": ["q1"], "seed": ["20"],
                         **dict(zip(REGIME_KEYS, ([timing], [rate], [sup], [windows]),
                                    strict=True))})


def test_cells_are_the_regimes_then_the_real_corpora_without_title_context() -> None:
    synth = pd.concat([_synth("quiet", "0.0", "versions", "True"),
                       _synth("quiet", "0.0", "documents", "False"),
                       _synth("quiet", "0.0", "documents", "True")])
    real = pd.DataFrame({"method": ["a"] * 3, "corpus": ["peps", "peps", "endoflife"],
                         "context": ["none", "title", "none"]})
    out = cells(synth, real)
    assert list(out) == ["quiet / rumors 0 / documents (no windows)",
                         "quiet / rumors 0 / documents", "quiet / rumors 0 / versions",
                         "peps", "endoflife"]
    assert set(out["peps"].context) == {"none"}


def test_regime_names_say_no_windows_only_for_documents() -> None:
    assert regime_name("uniform", "0.25", "versions", "False") == "uniform / rumors 0.25 / versions"
    assert regime_name("uniform", "0.75", "documents", "False").endswith("(no windows)")


def test_calibrated_ece_uses_the_development_fit() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=4000)
    correct = rng.uniform(size=4000) < 0.5  # raw scores say nothing: the fit maps to ~0.5
    frame = pd.DataFrame({"probability": p, "grade": np.where(correct, "correct", "wrong")})
    dev, test = frame.iloc[:2000], frame.iloc[2000:]
    raw = np.mean(np.abs(test.probability - 0.5))
    assert raw > 0.2
    assert calibrated_ece(dev, test) == pytest.approx(0.0, abs=0.06)
    assert np.isnan(calibrated_ece(dev.iloc[:0], test))
