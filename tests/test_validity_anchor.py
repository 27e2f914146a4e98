"""The validity-anchored signals (SmartVector v2's library options): the temporal signal and
confidence do not decay while a vector is in force and decay from when it stopped being in
force; contradictions resolved by a clear authority margin, else recency."""

from __future__ import annotations

import numpy as np
import pytest

from smartvector import (
    ConfidenceParams,
    ConsolidationParams,
    HashingEmbedder,
    SmartVectorStore,
    StoreConfig,
    TemporalParams,
)
from smartvector.scoring import temporal_signal
from smartvector.timeutil import DAY, to_ts

V = TemporalParams(half_life_days=10.0, outside_window=0.05, anchor="validity")


def test_validity_temporal_is_one_in_force_then_halves_per_half_life() -> None:
    at = 100 * DAY
    created = np.array([0.0, 0.0, 0.0, 99 * DAY, 0.0])
    vf = np.array([0.0, 0.0, 0.0, 99 * DAY, 150 * DAY])
    vt = np.array([np.inf, 90 * DAY, np.inf, np.inf, np.inf])
    ended = np.array([np.inf, np.inf, 80 * DAY, np.inf, np.inf])
    out = temporal_signal(at, created, vf, vt, V, ended)
    # in force (however old), window closed 10 days ago, ended 20 days ago, fresh, not yet valid
    assert out == pytest.approx([1.0, 0.5, 0.25, 1.0, 0.05])
    # the paper's anchor on the same rows: age since creation, outside_window once closed
    paper = temporal_signal(at, created, vf, vt, TemporalParams(10.0, 0.05), ended)
    assert paper == pytest.approx([2 ** -10, 0.05, 2 ** -10, 2 ** -0.1, 0.05])


def test_bad_anchor_and_resolution_are_rejected() -> None:
    with pytest.raises(ValueError, match="temporal.anchor"):
        TemporalParams(anchor="birth")
    with pytest.raises(ValueError, match="confidence.anchor"):
        ConfidenceParams(anchor="birth")
    with pytest.raises(ValueError, match="consolidation.resolution"):
        ConsolidationParams(resolution="coin")
    with pytest.raises(ValueError, match="consolidation.authority_margin"):
        ConsolidationParams(authority_margin=1.5)


def _store(**consolidation) -> SmartVectorStore:
    cfg = StoreConfig(temporal=V, confidence=ConfidenceParams(half_life_days=10.0,
                                                              anchor="validity"),
                      consolidation=ConsolidationParams(contradiction_similarity=0.3,
                                                        **consolidation))
    return SmartVectorStore(HashingEmbedder(dim=256), "exact", cfg)


POLICY = "Retention policy: customer records are kept for 90 days after closure."
RUMOR = "heard customer records are kept for 7 days after closure now"


def test_authority_margin_lets_a_policy_beat_a_newer_rumor() -> None:
    s = _store(resolution="authority_margin", authority_margin=0.3)
    s.add_document("policy", POLICY, at="2024-01-01", source_type="policy_doc")
    s.consolidate("2024-01-02")
    s.add_document("rumor", RUMOR, at="2024-03-01", source_type="slack")
    rep = s.consolidate("2024-03-02")
    assert rep.contradictions == 1
    lost = s.columns["lost_at"]
    assert lost[s.row("rumor@v1#0")] == to_ts("2024-03-02")
    assert np.isinf(lost[s.row("policy@v1#0")])
    # before it lost, the rumor was in force; 20 days after, its temporal signal is 1/4
    rows = np.array([s.row("rumor@v1#0"), s.row("policy@v1#0")])
    before = s.search("how long are customer records kept", "2024-03-01T12:00", pool=5,
                      record_access=False)
    after = s.search("how long are customer records kept", "2024-03-22", pool=5,
                     record_access=False)
    tb = dict(zip(before.rows.tolist(), before.temporal.tolist(), strict=True))
    ta = dict(zip(after.rows.tolist(), after.temporal.tolist(), strict=True))
    assert tb[rows[0]] == 1.0 and ta[rows[0]] == pytest.approx(0.25)
    assert ta[rows[1]] == 1.0  # the policy stays in force: no decay however old
    # confidence of the policy does not decay with age while in force
    c1, c2 = s.confidence_at(rows[1:], "2024-03-22"), s.confidence_at(rows[1:], "2025-03-22")
    assert c1 == pytest.approx(c2)


def test_without_a_margin_the_newer_source_wins() -> None:
    s = _store(resolution="authority_margin", authority_margin=0.3)
    s.add_document("old", POLICY, at="2024-01-01", source_type="policy_doc")
    s.consolidate("2024-01-02")
    newer = POLICY.replace("90 days", "60 days")
    s.add_document("new", newer, at="2024-03-01", source_type="wiki")  # 0.75 vs 0.90
    s.consolidate("2024-03-02")
    assert np.isinf(s.columns["lost_at"][s.row("new@v1#0")])
    assert s.columns["lost_at"][s.row("old@v1#0")] == to_ts("2024-03-02")
    # the paper's majority vote lets authority break the recency/authority tie instead
    p = _store(resolution="majority")
    p.add_document("old", POLICY, at="2024-01-01", source_type="policy_doc")
    p.consolidate("2024-01-02")
    p.add_document("new", newer, at="2024-03-01", source_type="wiki")
    p.consolidate("2024-03-02")
    assert p.columns["lost_at"][p.row("new@v1#0")] == to_ts("2024-03-02")
