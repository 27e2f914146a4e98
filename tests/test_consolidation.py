"""The consolidation agent: claims, contradictions, dependency edges, promotion, archival."""

from __future__ import annotations

import numpy as np
import pytest

from smartvector import ConsolidationParams, SmartVectorStore, Status, StoreConfig
from smartvector.consolidation import claims, differ_in_claims
from smartvector.timeutil import to_ts

P90 = "Passwords must be rotated every 90 days for all employee accounts."
P30 = "Passwords must be rotated every 30 days for all employee accounts."


# ------------------------------------------------------------------------------ claims
@pytest.mark.parametrize(("text", "expected"), [
    ("Rotate every 90 days.", {"90 day"}),
    ("Rotate every 90 day", {"90 day"}),
    ("Report within 24 hours or 2 days", {"24 hour", "2 day"}),
    ("Discount of 15% applies", {"15 %"}),
    ("It costs $1,000,000.", {"$1000000"}),
    ("Pi is 3.14", {"3.14"}),
    ("Upgrade to v2 now", set()),
    ("No numbers here.", set()),
    ("", set()),
])
def test_claims(text, expected):
    assert claims(text) == frozenset(expected)


@pytest.mark.parametrize(("a", "b", "differ"), [
    (P90, P30, True),
    (P90, P90, False),
    ("every 90 days", "every 90 day", False),  # plural normalised
    ("90 days or 3 months", "within 90 days", False),  # one shared claim is agreement
    ("No numbers at all.", P30, False),  # one side states nothing
    ("No numbers.", "None here.", False),
    ("Lock after 5 minutes", "Lock after 10 minutes", True),
])
def test_differ_in_claims(a, b, differ):
    assert differ_in_claims(a, b) is differ
    assert differ_in_claims(b, a) is differ


# ------------------------------------------------------------------------ contradictions
def conf(store: SmartVectorStore, vid: str, at) -> float:
    return float(store.confidence_at(np.array([store.row(vid)]), at)[0])


def cos(store: SmartVectorStore, a: str, b: str) -> float:
    va, vb = store.index.get_vectors(np.array([store.row(a), store.row(b)]))
    return float(va @ vb)


def test_contradiction_found_resolved_and_not_repeated(make_store):
    store = make_store()
    store.add_document("rumour", P30, "2024-01-15", source_type="slack")
    store.add_document("policy", P90, "2024-02-01", source_type="policy_doc")
    assert cos(store, "rumour@v1#0", "policy@v1#0") > 0.70  # the default threshold
    t = to_ts("2024-02-02")
    before = {v: conf(store, v, t) for v in ("rumour@v1#0", "policy@v1#0")}
    rep = store.consolidate(t)
    assert rep.contradictions == 1 and rep.promoted == 2
    assert store.get("rumour@v1#0").edges.contradicts == ("policy@v1#0",)
    assert store.get("policy@v1#0").edges.contradicts == ("rumour@v1#0",)
    # the rumour is older and less authoritative: it loses and takes the penalty
    assert conf(store, "rumour@v1#0", t) == pytest.approx(before["rumour@v1#0"] - 0.15,
                                                          abs=1e-12)
    assert conf(store, "policy@v1#0", t) == before["policy@v1#0"]
    ev = [e for e in store.history("rumour@v1#0") if e.kind == "contradiction"]
    assert len(ev) == 1 and ev[0].delta == -0.15 and ev[0].at == t
    assert ev[0].detail.startswith("lost to policy@v1#0")
    assert not [e for e in store.history("policy@v1#0") if e.kind == "contradiction"]
    assert len(rep.details) == 1 and "kept policy@v1#0" in rep.details[0]
    # the contradiction edge appears at the pass, not before
    assert store.get("policy@v1#0", at="2024-02-01").edges.contradicts == ()

    rep2 = store.consolidate("2024-02-03")
    assert rep2.contradictions == 0
    assert store.get("policy@v1#0").edges.contradicts == ("rumour@v1#0",)
    assert len([e for e in store.history("rumour@v1#0") if e.kind == "contradiction"]) == 1


def test_contradiction_against_an_already_consolidated_vector(make_store):
    store = make_store()
    store.add_document("policy", P90, "2024-01-01", source_type="policy_doc")
    store.consolidate("2024-01-02")
    store.add_document("rumour", P30, "2024-01-03", source_type="slack")
    rep = store.consolidate("2024-01-04")
    assert rep.contradictions == 1 and rep.promoted == 1
    # 1 vote each (recency: rumour, authority: policy): the tie goes to authority
    ev = [e for e in store.history("rumour@v1#0") if e.kind == "contradiction"]
    assert len(ev) == 1 and "lost to policy@v1#0" in ev[0].detail
    assert store.get("policy@v1#0").edges.contradicts == ("rumour@v1#0",)
    assert store.consolidate("2024-01-05").contradictions == 0


def test_majority_rule_lets_newer_well_liked_source_win(make_store):
    store = make_store()
    store.add_document("policy", P90, "2024-01-01", source_type="policy_doc")
    store.add_document("rumour", P30, "2024-01-10", source_type="slack")
    store.feedback("rumour@v1#0", True, "2024-01-11")
    store.feedback("rumour@v1#0", True, "2024-01-11")
    t = to_ts("2024-01-12")
    before = conf(store, "policy@v1#0", t)
    rep = store.consolidate(t)
    assert rep.contradictions == 1
    # recency and feedback vote for the rumour, authority for the policy: 2-1
    assert conf(store, "policy@v1#0", t) == pytest.approx(before - 0.15, abs=1e-12)
    ev = [e for e in store.history("policy@v1#0") if e.kind == "contradiction"]
    assert len(ev) == 1 and "lost to rumour@v1#0" in ev[0].detail
    assert "recency:rumour@v1#0" in ev[0].detail and "feedback:rumour@v1#0" in ev[0].detail
    assert not [e for e in store.history("rumour@v1#0") if e.kind == "contradiction"]


def test_contradiction_penalty_is_configurable(make_store):
    cfg = StoreConfig(consolidation=ConsolidationParams(contradiction_penalty=0.4))
    store = make_store(config=cfg)
    store.add_document("rumour", P30, "2024-01-01", source_type="slack")
    store.add_document("policy", P90, "2024-01-02", source_type="policy_doc")
    t = to_ts("2024-01-03")
    before = conf(store, "rumour@v1#0", t)
    store.consolidate(t)
    assert conf(store, "rumour@v1#0", t) == pytest.approx(max(before - 0.4, 0.01), abs=1e-12)


@pytest.mark.parametrize("second", [
    P90,  # same quantity
    P90.replace("90 days", "90 day"),  # same quantity, other spelling
    "Passwords must be rotated regularly for all employee accounts.",  # no quantity
])
def test_same_or_missing_quantities_are_no_contradiction(make_store, second):
    store = make_store()
    store.add_document("a", P90, "2024-01-01", source_type="policy_doc")
    store.add_document("b", second, "2024-01-02", source_type="slack")
    assert cos(store, "a@v1#0", "b@v1#0") > 0.70
    rep = store.consolidate("2024-01-03")
    assert rep.contradictions == 0
    assert store.get("a@v1#0").edges.contradicts == ()


def test_no_contradiction_within_one_document(make_store):
    store = make_store()
    store.add_document("a", f"{P90}\n\n{P30}", "2024-01-01", source_type="policy_doc")
    assert cos(store, "a@v1#0", "a@v1#1") > 0.70
    assert store.consolidate("2024-01-02").contradictions == 0


def test_no_contradiction_below_the_similarity_threshold(make_store):
    cfg = StoreConfig(consolidation=ConsolidationParams(contradiction_similarity=0.95))
    store = make_store(config=cfg)
    store.add_document("a", P90, "2024-01-01", source_type="policy_doc")
    store.add_document("b", P30, "2024-01-02", source_type="slack")
    assert store.consolidate("2024-01-03").contradictions == 0
    # a different wording on a different topic does not contradict even at a low threshold
    store2 = make_store()
    store2.add_document("a", P90, "2024-01-01")
    store2.add_document("b", "The cafeteria opens at 8 and closes at 3.", "2024-01-02")
    assert store2.consolidate("2024-01-03").contradictions == 0


def test_no_contradiction_with_a_deprecated_vector(make_store):
    store = make_store()
    store.add_document("rumour", P30, "2024-01-01", source_type="slack")
    store.add_document("rumour", "Lunch is free on Fridays.", "2024-01-05", source_type="slack")
    store.add_document("policy", P90, "2024-01-06", source_type="policy_doc")
    rep = store.consolidate("2024-01-07")
    assert rep.contradictions == 0
    assert store.get("rumour@v1#0").status == Status.DEPRECATED


def test_contradiction_loser_sends_a_ripple_to_its_dependents(make_store):
    cfg = StoreConfig(consolidation=ConsolidationParams(dependency_similarity=-1.0))
    store = make_store(config=cfg)
    store.add_document("rumour", P30, "2024-01-01", source_type="slack")
    store.add_document("faq", "FAQ: how the password rotation reminder works.", "2024-01-01",
                       source_type="wiki", depends_on=["rumour"])
    store.add_document("policy", P90, "2024-01-02", source_type="policy_doc")
    t = to_ts("2024-01-03")
    before = conf(store, "faq@v1#0", t)
    rep = store.consolidate(t)
    assert rep.contradictions == 1 and rep.dependency_edges == 1 and rep.ripples == 1
    assert conf(store, "faq@v1#0", t) == pytest.approx(before - 0.15, abs=1e-12)
    ev = [e for e in store.history("faq@v1#0") if e.kind == "ripple"]
    assert [(e.delta, e.detail) for e in ev] == [(-0.15, "from rumour@v1#0 at depth 0")]


# ------------------------------------------------------------------- dependency edges
def test_dependency_edges_from_metadata(make_store):
    cfg = StoreConfig(consolidation=ConsolidationParams(dependency_similarity=-1.0))
    store = make_store(config=cfg)
    store.add_document("base", "Base rules for expense reports.\n\nTravel must be booked early.",
                       "2024-01-01", source_type="policy_doc")
    store.add_document("howto", "How to file expense reports quickly.\n\nAttach receipts.",
                       "2024-01-02", source_type="wiki", depends_on=["base"])
    rep = store.consolidate("2024-01-03")
    assert rep.dependency_edges == 2  # each howto chunk -> its closest base chunk
    assert store.get("howto@v1#0").edges.depends_on == ("base@v1#0",)
    assert len(store.get("howto@v1#1").edges.depends_on) == 1
    assert store.get("base@v1#0").edges.depends_on == ()
    n = store.relational_edges_at(np.array([store.row("howto@v1#0")]), "2024-01-03")
    assert n.tolist() == [1]
    hit = store.query("How to file expense reports quickly.", "2024-01-04", k=1)[0]
    assert hit.vector_id == "howto@v1#0" and hit.relational == pytest.approx(0.1 * np.log(2))
    # no duplicates on a later pass
    assert store.consolidate("2024-01-04").dependency_edges == 0


def test_dependency_edges_respect_the_similarity_threshold(make_store):
    store = make_store()  # default dependency_similarity 0.5
    store.add_document("base", "Base rules for expense reports.", "2024-01-01")
    store.add_document("other", "Dogs are not allowed in the office.", "2024-01-02",
                       depends_on=["base"])
    assert cos(store, "base@v1#0", "other@v1#0") < 0.5
    assert store.consolidate("2024-01-03").dependency_edges == 0


def test_dependency_on_a_later_document_is_linked_when_it_arrives(make_store):
    cfg = StoreConfig(consolidation=ConsolidationParams(dependency_similarity=-1.0))
    store = make_store(config=cfg)
    store.add_document("howto", "How to file expense reports.", "2024-01-01",
                       depends_on=["base"])
    assert store.consolidate("2024-01-02").dependency_edges == 0  # unknown target: skipped
    store.add_document("base", "Base rules for expense reports.", "2024-01-05")
    rep = store.consolidate("2024-01-06")
    assert rep.dependency_edges == 1
    assert store.get("howto@v1#0").edges.depends_on == ("base@v1#0",)
    assert store.get("howto@v1#0", at="2024-01-05").edges.depends_on == ()


def test_dependency_on_a_document_from_the_future_of_the_pass(make_store):
    """A target whose chunks are all created after the pass has nothing to link to yet (the
    pass used to fail on it: the closest of no chunks)."""
    cfg = StoreConfig(consolidation=ConsolidationParams(dependency_similarity=-1.0))
    store = make_store(config=cfg)
    store.add_document("base", "Base rules for expense reports.", "2024-01-05")
    store.add_document("howto", "How to file expense reports.", "2024-01-01",
                       depends_on=["base"])
    rep = store.consolidate("2024-01-02")
    assert (rep.dependency_edges, rep.promoted) == (0, 1)
    assert store.consolidate("2024-01-06").dependency_edges == 1
    assert store.get("howto@v1#0").edges.depends_on == ("base@v1#0",)


# --------------------------------------------------------------------- the pass itself
def test_consolidating_an_empty_store(make_store):
    rep = make_store().consolidate("2024-01-01")
    assert (rep.checked, rep.promoted, rep.contradictions, rep.dependency_edges, rep.ripples,
            rep.archived, rep.dormant) == (0, 0, 0, 0, 0, 0, 0)


def test_consolidation_ignores_vectors_from_its_future(make_store):
    store = make_store()
    store.add_document("a", "Some text about cats.", "2024-01-01")
    store.add_document("b", "Some text about dogs.", "2024-02-01")
    rep = store.consolidate("2024-01-15")
    assert rep.checked == 1 and rep.promoted == 1
    assert store.get("b@v1#0").status == Status.UNCONSOLIDATED
    assert store.consolidate("2024-02-02").promoted == 1


def test_archive_after_zero_days_archives_at_the_next_pass(make_store):
    cfg = StoreConfig(consolidation=ConsolidationParams(archive_after_days=0.0))
    store = make_store(config=cfg)
    store.add_document("a", "Version one.", "2024-01-01")
    store.add_document("a", "Version two.", "2024-01-02")
    rep = store.consolidate("2024-01-02")
    assert rep.archived == 1 and rep.promoted == 1
    assert store.get("a@v1#0").status == Status.ARCHIVED


@pytest.mark.parametrize(("kw", "name"), [
    ({"neighbours": 0}, "consolidation.neighbours"),
    ({"contradiction_similarity": 1.5}, "consolidation.contradiction_similarity"),
    ({"dependency_similarity": float("nan")}, "consolidation.dependency_similarity"),
    ({"contradiction_penalty": -0.1}, "consolidation.contradiction_penalty"),
    ({"archive_after_days": -1}, "consolidation.archive_after_days"),
])
def test_consolidation_params_validation(kw, name):
    with pytest.raises(ValueError, match=name):
        ConsolidationParams(**kw)
