"""The confidence engine's closed form, number by number, and its use by the store."""

from __future__ import annotations

import math

import numpy as np
import pytest

from smartvector import ConfidenceParams, SmartVectorStore
from smartvector.confidence import ConfidenceEngine
from smartvector.timeutil import DAY, to_ts

ENGINE = ConfidenceEngine()


def one(x) -> float:
    arr = np.asarray(x)
    assert arr.shape == ()
    return float(arr)


# ----------------------------------------------------------------------------- decay
def test_decay_halves_every_half_life():
    assert one(ENGINE.decay(0.9, 0)) == pytest.approx(0.9, abs=1e-15)
    assert one(ENGINE.decay(0.9, 30)) == pytest.approx(0.45, abs=1e-15)
    assert one(ENGINE.decay(0.9, 60)) == pytest.approx(0.225, abs=1e-15)
    assert one(ENGINE.decay(0.9, 15)) == pytest.approx(0.9 / math.sqrt(2), abs=1e-15)


def test_decay_never_below_floor_and_no_bonus_for_negative_age():
    assert one(ENGINE.decay(0.9, 10_000)) == 0.01
    assert one(ENGINE.decay(0.9, 1e300)) == 0.01
    assert one(ENGINE.decay(0.9, -30)) == pytest.approx(0.9, abs=1e-15)


def test_decay_uses_configured_half_life():
    e = ConfidenceEngine(ConfidenceParams(half_life_days=10.0))
    assert one(e.decay(0.8, 10)) == pytest.approx(0.4, abs=1e-15)
    assert one(e.decay(0.8, 30)) == pytest.approx(0.1, abs=1e-15)


def test_decay_is_vectorised():
    out = ENGINE.decay([0.9, 0.9, 0.5], [0, 30, 60])
    np.testing.assert_allclose(out, [0.9, 0.45, 0.125], atol=1e-15)


# --------------------------------------------------------------------------- feedback
def test_accept_adds_003_and_correct_subtracts_008():
    assert one(ENGINE.compute(0.5, 0, positive=1)) == pytest.approx(0.53, abs=1e-12)
    assert one(ENGINE.compute(0.5, 0, positive=3)) == pytest.approx(0.59, abs=1e-12)
    assert one(ENGINE.compute(0.5, 0, negative=1)) == pytest.approx(0.42, abs=1e-12)
    assert one(ENGINE.compute(0.5, 0, negative=2)) == pytest.approx(0.34, abs=1e-12)


def test_a_correction_weighs_more_than_an_acceptance():
    both = one(ENGINE.compute(0.5, 0, positive=1, negative=1))
    assert both == pytest.approx(0.45, abs=1e-12)
    assert both < 0.5
    p = ConfidenceParams()
    assert p.negative_penalty > p.positive_boost


def test_feedback_applies_on_top_of_decay():
    assert one(ENGINE.compute(0.9, 30, positive=2)) == pytest.approx(0.51, abs=1e-12)
    # the floor applies to the decayed part, feedback then adds on top
    assert one(ENGINE.compute(0.9, 10_000, positive=1)) == pytest.approx(0.04, abs=1e-12)


def test_result_is_clipped_to_floor_and_one():
    assert one(ENGINE.compute(0.99, 0, positive=5)) == 1.0
    assert one(ENGINE.compute(0.2, 0, negative=10)) == 0.01
    assert one(ENGINE.compute(0.9, 0, penalty=5.0)) == 0.01
    assert one(ENGINE.compute(0.9, 0, penalty=-5.0)) == 1.0


def test_penalty_is_subtracted():
    assert one(ENGINE.compute(0.9, 0, penalty=0.15)) == pytest.approx(0.75, abs=1e-12)
    assert one(ENGINE.compute(0.9, 0, penalty=0.225)) == pytest.approx(0.675, abs=1e-12)


# ---------------------------------------------------------------------------- access
def test_access_reinforcement_is_logarithmic():
    assert one(ENGINE.access_boost(0)) == 0.0
    assert one(ENGINE.access_boost(1)) == pytest.approx(0.01 * math.log(2), abs=1e-15)
    assert one(ENGINE.access_boost(10)) == pytest.approx(0.01 * math.log(11), abs=1e-15)
    assert one(ENGINE.compute(0.5, 0, accesses=10)) == pytest.approx(
        0.5 + 0.01 * math.log(11), abs=1e-12)


def test_access_reinforcement_is_capped():
    # 0.01 * ln(1 + n) reaches the 0.10 cap at n = e^10 - 1 ~ 22025.5
    assert one(ENGINE.access_boost(22025)) < 0.10
    assert one(ENGINE.access_boost(22025)) == pytest.approx(0.01 * math.log(22026), abs=1e-15)
    assert one(ENGINE.access_boost(22027)) == 0.10
    for n in (10**6, 10**9, 10**15, 1e300):
        assert one(ENGINE.access_boost(n)) == 0.10
    # a huge access count cannot run a weak vector away
    assert one(ENGINE.compute(0.3, 0, accesses=1e300)) == pytest.approx(0.4, abs=1e-12)
    boosts = ENGINE.access_boost(np.logspace(0, 12, 200))
    assert np.all(np.diff(boosts) >= 0) and boosts.max() <= 0.10


def test_negative_access_counts_give_no_boost():
    assert one(ENGINE.access_boost(-5)) == 0.0


# ---------------------------------------------------------------------------- dormancy
def test_dormancy_threshold_is_015():
    assert ConfidenceParams().dormant_threshold == 0.15
    np.testing.assert_array_equal(
        ENGINE.is_dormant([0.0, 0.1, 0.1499999, 0.15, 0.16, 1.0]),
        [True, True, True, False, False, False])


def test_decayed_policy_crosses_dormancy_between_two_and_three_half_lives():
    # 0.9 * 2^(-t/30) < 0.15  <=>  t > 30 * log2(6) ~ 77.5 days
    assert not ENGINE.is_dormant(ENGINE.compute(0.9, 77.0))
    assert ENGINE.is_dormant(ENGINE.compute(0.9, 78.0))


# -------------------------------------------------------------------------- params
@pytest.mark.parametrize(("kw", "name"), [
    ({"half_life_days": 0}, "confidence.half_life_days"),
    ({"half_life_days": float("nan")}, "confidence.half_life_days"),
    ({"positive_boost": -0.1}, "confidence.positive_boost"),
    ({"negative_penalty": float("inf")}, "confidence.negative_penalty"),
    ({"access_cap": -1}, "confidence.access_cap"),
    ({"floor": 1.0}, "confidence.floor"),
    ({"floor": -0.1}, "confidence.floor"),
    ({"dormant_threshold": 1.5}, "confidence.dormant_threshold"),
])
def test_params_validation_names_the_field(kw, name):
    with pytest.raises(ValueError, match=name):
        ConfidenceParams(**kw)


# ------------------------------------------------------------------------ in a store
def test_store_confidence_starts_at_authority_and_decays(make_store):
    store: SmartVectorStore = make_store()
    store.add_document("p", "Passwords must be rotated regularly.", "2024-01-01",
                       source_type="policy_doc")
    store.add_document("s", "Someone said lunch is free today.", "2024-01-01",
                       source_type="slack")
    rows = np.array([store.row("p@v1#0"), store.row("s@v1#0")])
    t0 = to_ts("2024-01-01")
    np.testing.assert_allclose(store.confidence_at(rows, t0), [0.9, 0.3], atol=1e-12)
    np.testing.assert_allclose(store.confidence_at(rows, t0 + 30 * DAY), [0.45, 0.15],
                               atol=1e-12)
    np.testing.assert_allclose(store.confidence_at(rows, t0 + 60 * DAY), [0.225, 0.075],
                               atol=1e-12)
    # explicit authority overrides the source type's
    store.add_document("x", "An explicit authority.", t0, source_type="slack", authority=0.6)
    assert store.get("x@v1#0", at=t0).confidence == pytest.approx(0.6, abs=1e-12)


def test_store_feedback_moves_confidence_by_the_configured_amounts(make_store):
    store = make_store()
    store.add_document("p", "Passwords must be rotated regularly.", "2024-01-01",
                       source_type="technical_doc")
    t = to_ts("2024-01-01")
    assert store.feedback("p@v1#0", True, t) == pytest.approx(0.88, abs=1e-12)
    assert store.feedback("p@v1#0", True, t) == pytest.approx(0.91, abs=1e-12)
    assert store.feedback("p@v1#0", False, t) == pytest.approx(0.83, abs=1e-12)
    kinds = [(e.kind, e.delta) for e in store.history("p@v1#0")]
    assert kinds == [("created", 0.0), ("accepted", 0.03), ("accepted", 0.03),
                     ("corrected", -0.08)]
    v = store.get("p@v1#0", at=t)
    assert (v.positive_feedback, v.negative_feedback) == (2, 1)
    assert v.last_validated == t
    with pytest.raises(KeyError, match="nope"):
        store.feedback("nope", True, t)


def test_store_feedback_is_clipped(make_store):
    store = make_store()
    store.add_document("p", "Some official fact.", 0.0, source_type="official_db")
    for _ in range(5):
        c = store.feedback("p@v1#0", True, 0.0)
    assert c == 1.0
    for _ in range(30):
        c = store.feedback("p@v1#0", False, 0.0)
    assert c == 0.01
