"""The four retrieval signals and their convex combination."""

from __future__ import annotations

import math

import numpy as np
import pytest

from smartvector import RelationalParams, ScoringWeights, TemporalParams
from smartvector.scoring import combine, relational_signal, temporal_signal
from smartvector.timeutil import DAY

TP = TemporalParams()
RP = RelationalParams()
INF = np.inf


def temporal(at_days, created_days, vf_days=-INF, vt_days=INF, params=TP) -> float:
    out = temporal_signal(at_days * DAY, created_days * DAY, vf_days * DAY, vt_days * DAY,
                          params)
    return float(out)


# --------------------------------------------------------------------------- temporal
def test_temporal_halves_every_half_life_inside_the_window():
    assert temporal(0, 0) == 1.0
    assert temporal(30, 0) == pytest.approx(0.5, abs=1e-15)
    assert temporal(60, 0) == pytest.approx(0.25, abs=1e-15)
    assert temporal(45, 15, vf_days=0, vt_days=100) == pytest.approx(0.5, abs=1e-15)


def test_temporal_outside_the_window_is_005():
    # before valid_from
    assert temporal(5, 0, vf_days=10, vt_days=20) == 0.05
    # exactly at valid_from is inside
    assert temporal(10, 10, vf_days=10, vt_days=20) == 1.0
    # at valid_to is outside (half-open window), just before it is inside
    assert temporal(20, 10, vf_days=10, vt_days=20) == 0.05
    assert temporal(20 - 1e-6, 10, vf_days=10, vt_days=20) == pytest.approx(
        2 ** (-(10 - 1e-6) / 30), abs=1e-12)
    # after valid_to
    assert temporal(500, 10, vf_days=10, vt_days=20) == 0.05


def test_temporal_outside_value_is_configurable():
    p = TemporalParams(half_life_days=10.0, outside_window=0.2)
    assert temporal(1, 0, vf_days=5, params=p) == 0.2
    assert temporal(20, 0, params=p) == pytest.approx(0.25, abs=1e-15)


def test_temporal_gives_no_bonus_for_negative_age():
    # a vector "created" after the reference time counts as age 0, never above 1
    assert temporal(0, 30) == 1.0
    assert temporal(0, 1e6) == 1.0


def test_temporal_is_vectorised():
    out = temporal_signal(
        30 * DAY,
        np.array([0, 0, 0, 60]) * DAY,
        np.array([-INF, 40 * DAY, -INF, -INF]),
        np.array([INF, INF, 30 * DAY, INF]),
        TP,
    )
    np.testing.assert_allclose(out, [0.5, 0.05, 0.05, 1.0], atol=1e-15)


def test_temporal_params_validation():
    with pytest.raises(ValueError, match="temporal.half_life_days"):
        TemporalParams(half_life_days=-1)
    with pytest.raises(ValueError, match="temporal.outside_window"):
        TemporalParams(outside_window=1.5)


# ------------------------------------------------------------------------- relational
def test_relational_is_log_of_edges_with_cap():
    out = relational_signal([0, 1, 2, 10, 19, 20, 21, 1000, 10**9], RP)
    expected = [0.0, 0.1 * math.log(2), 0.1 * math.log(3), 0.1 * math.log(11),
                0.1 * math.log(20), 0.3, 0.3, 0.3, 0.3]
    np.testing.assert_allclose(out, expected, atol=1e-15)
    # 19 edges stay just below the cap; 20 edges reach it (ln 21 > 3)
    assert out[4] < 0.3 and out[5] == 0.3


def test_relational_negative_edge_count_is_zero_and_params_apply():
    assert float(relational_signal(-3, RP)) == 0.0
    p = RelationalParams(scale=0.5, cap=1.0)
    assert float(relational_signal(1, p)) == pytest.approx(0.5 * math.log(2), abs=1e-15)
    assert float(relational_signal(100, p)) == 1.0
    with pytest.raises(ValueError, match="relational.cap"):
        RelationalParams(cap=-0.1)
    with pytest.raises(ValueError, match="relational.scale"):
        RelationalParams(scale=float("nan"))


# ---------------------------------------------------------------------------- weights
@pytest.mark.parametrize(("kw", "name"), [
    ({"semantic": -0.1}, "weights.semantic"),
    ({"temporal": -1.0}, "weights.temporal"),
    ({"confidence": float("nan")}, "weights.confidence"),
    ({"relational": float("inf")}, "weights.relational"),
    ({"semantic": True}, "weights.semantic"),
])
def test_weights_reject_bad_values_naming_the_field(kw, name):
    with pytest.raises(ValueError, match=name):
        ScoringWeights(**kw)


def test_weights_reject_all_zero():
    with pytest.raises(ValueError, match=r"^weights must be not all zero"):
        ScoringWeights(0, 0, 0, 0)


def test_weights_default_and_normalisation():
    w = ScoringWeights()
    assert w.as_tuple() == (0.35, 0.25, 0.25, 0.15)
    assert sum(w.normalised()) == pytest.approx(1.0, abs=1e-15)
    assert ScoringWeights(2, 1, 1, 0).normalised() == (0.5, 0.25, 0.25, 0.0)
    assert ScoringWeights(0, 0, 3, 0).normalised() == (0.0, 0.0, 1.0, 0.0)


# ---------------------------------------------------------------------------- combine
def test_combine_equals_the_hand_sum():
    hand = 0.35 * 0.8 + 0.25 * 0.5 + 0.25 * 0.9 + 0.15 * 0.2
    assert hand == pytest.approx(0.66, abs=1e-15)
    assert float(combine(ScoringWeights(), 0.8, 0.5, 0.9, 0.2)) == pytest.approx(hand, abs=1e-15)
    # the same weights unnormalised give the same score
    assert float(combine(ScoringWeights(7, 5, 5, 3), 0.8, 0.5, 0.9, 0.2)) == pytest.approx(
        hand, abs=1e-15)


def test_combine_single_signal_weights_pick_that_signal():
    sig = dict(semantic=0.7, temporal=0.1, confidence=0.4, relational=0.05)
    assert float(combine(ScoringWeights(1, 0, 0, 0), **sig)) == pytest.approx(0.7, abs=1e-15)
    assert float(combine(ScoringWeights(0, 2, 0, 0), **sig)) == pytest.approx(0.1, abs=1e-15)
    assert float(combine(ScoringWeights(0, 0, 0.5, 0), **sig)) == pytest.approx(0.4, abs=1e-15)
    assert float(combine(ScoringWeights(0, 0, 0, 9), **sig)) == pytest.approx(0.05, abs=1e-15)


def test_combine_is_vectorised():
    s = np.array([0.9, 0.1, 0.5])
    t = np.array([1.0, 0.05, 0.5])
    c = np.array([0.9, 0.3, 0.5])
    r = np.array([0.0, 0.3, 0.5])
    hand = 0.35 * s + 0.25 * t + 0.25 * c + 0.15 * r
    np.testing.assert_allclose(combine(ScoringWeights(), s, t, c, r), hand, atol=1e-15)


def test_combine_of_unit_signals_never_exceeds_one():
    # normalising the weights first can overshoot 1 by an ulp (0.37+0.93+0.06+0.06 below)
    w = ScoringWeights(0.3727381234678555, 0.9333619298250824, 0.060298816438658975,
                       0.06494092182244116)
    assert float(combine(w, 1.0, 1.0, 1.0, 1.0)) <= 1.0
    # huge (valid) weights must not overflow into a zero or NaN score
    big = ScoringWeights(1e308, 1e308, 1e308, 1e308)
    assert float(combine(big, 1.0, 1.0, 1.0, 1.0)) == pytest.approx(1.0, abs=1e-15)
    assert float(combine(big, 0.2, 0.4, 0.6, 0.8)) == pytest.approx(0.5, abs=1e-15)
