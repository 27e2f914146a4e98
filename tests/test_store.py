"""SmartVectorStore: surgical updates, lifecycle, time travel, bad numbers, persistence."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from smartvector import (
    ConsolidationParams,
    HashingEmbedder,
    ScoringWeights,
    SmartVectorStore,
    Status,
    StoreConfig,
)
from smartvector.chunking import chunk_text
from smartvector.scoring import combine
from smartvector.timeutil import DAY, to_ts

PARAS = [
    "Passwords must be rotated every 90 days for all employee accounts.",
    "Remote access to the corporate network requires the VPN client and a hardware token.",
    "Laptops must use full disk encryption and lock the screen after 5 minutes of inactivity.",
    "Security incidents must be reported to the security team within 24 hours.",
    "Visitors must sign in at reception and wear a badge at all times.",
]
DOC = "\n\n".join(PARAS)


def doc_with(**changes: str) -> str:
    """DOC with paragraph ``p<i>`` replaced (an empty string removes it)."""
    paras = list(PARAS)
    for key, text in changes.items():
        paras[int(key[1:])] = text
    return "\n\n".join(p for p in paras if p)


class CountingEmbedder:
    """Wraps an embedder and records every batch of texts it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return self.inner.encode(texts)

    @property
    def n_texts(self) -> int:
        return sum(map(len, self.calls))


class PoisonEmbedder:
    """Embeds texts containing POISON to a bad row (zeros or NaN)."""

    def __init__(self, inner, bad: float) -> None:
        self.inner, self.bad = inner, bad
        self.name, self.dim = inner.name, inner.dim

    def encode(self, texts):
        out = np.array(self.inner.encode(texts))
        for i, t in enumerate(texts):
            if "POISON" in t:
                out[i] = self.bad
        return out


def current_ids(store: SmartVectorStore, doc_id: str) -> list[str]:
    return [store.ids[r] for r in store.docs[doc_id].rows]


def assert_offsets(store: SmartVectorStore, doc_id: str) -> None:
    text = store.document_text(doc_id)
    ids = current_ids(store, doc_id)
    assert len(ids) == len(chunk_text(text, store.config.max_chunk_chars))
    for i, vid in enumerate(ids):
        v = store.get(vid)
        assert v.chunk_index == i
        assert text[v.start:v.end] == v.content


# ======================================================================= surgical updates
def test_one_word_edit_reembeds_exactly_one_chunk(embedder):
    emb = CountingEmbedder(embedder)
    store = SmartVectorStore(emb)
    r1 = store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc")
    assert (r1.n_chunks, r1.n_reembedded, r1.kept) == (5, 5, 0)
    assert emb.calls == [PARAS]

    emb.calls.clear()
    new_text = doc_with(p2=PARAS[2].replace("Laptops", "Notebooks"))
    r2 = store.add_document("sec", new_text, "2024-02-01", source_type="policy_doc")
    assert (r2.n_chunks, r2.n_reembedded, r2.kept, r2.version) == (5, 1, 4, 2)
    assert emb.calls == [[PARAS[2].replace("Laptops", "Notebooks")]]
    assert emb.n_texts == 1
    assert r2.added == ["sec@v2#2"] and r2.deprecated == ["sec@v1#2"]
    assert len(store) == 6 and len(store.index) == 6
    assert current_ids(store, "sec") == ["sec@v1#0", "sec@v1#1", "sec@v2#2", "sec@v1#3",
                                         "sec@v1#4"]
    assert_offsets(store, "sec")

    # re-chunking and re-embedding the whole new version (what a plain pipeline does)
    emb.calls.clear()
    SmartVectorStore(emb).add_document("sec", new_text, "2024-02-01")
    assert emb.n_texts == 5


def test_replacement_supersedes_and_deprecates_the_old_chunk(make_store):
    store = make_store()
    store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc")
    store.add_document("sec", doc_with(p2=PARAS[2].replace("5", "10")), "2024-02-01")
    assert store.lineage("sec@v2#2") == ["sec@v1#2"]
    assert store.lineage("sec@v1#2") == []
    old = store.get("sec@v1#2")
    assert old.edges.superseded_by == ("sec@v2#2",)
    assert store.get("sec@v2#2").edges.supersedes == ("sec@v1#2",)
    t = to_ts("2024-02-01")
    assert store.get("sec@v1#2", at=t).status == Status.DEPRECATED
    assert store.get("sec@v1#2", at=t - 1).status == Status.UNCONSOLIDATED
    assert store.get("sec@v1#1", at=t).status == Status.UNCONSOLIDATED  # kept: untouched
    kinds = [(e.kind, e.detail) for e in store.history("sec@v1#2")]
    assert kinds == [("created", "sec v1 chunk 2"), ("deprecated", "superseded by version 2")]
    assert [e.kind for e in store.history("sec@v2#2")] == ["created", "supersedes"]
    # a third version chains the lineage
    store.add_document("sec", doc_with(p2=PARAS[2].replace("5", "15")), "2024-03-01")
    assert store.lineage("sec@v3#2") == ["sec@v2#2", "sec@v1#2"]


DEP_CFG = StoreConfig(consolidation=ConsolidationParams(dependency_similarity=-1.0))
GUIDE = ("Laptop setup guide: enable full disk encryption and lock the screen after 5 minutes "
         "of inactivity.")
HW = "Approved hardware list for employee laptops and tokens."


@pytest.fixture
def dep_store(make_store) -> SmartVectorStore:
    """sec depends on hw; guide depends on sec (its laptop paragraph)."""
    store = make_store(config=DEP_CFG)
    store.add_document("hw", HW, "2024-01-01", source_type="official_db")
    store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc", depends_on=["hw"])
    store.add_document("guide", GUIDE, "2024-01-01", source_type="wiki", depends_on=["sec"])
    rep = store.consolidate("2024-01-02")
    assert rep.contradictions == 0 and rep.dependency_edges == 6 and rep.promoted == 7
    return store


def test_replacement_inherits_edges_and_ripples_at_next_consolidation(dep_store):
    s = dep_store
    assert s.get("guide@v1#0").edges.depends_on == ("sec@v1#2",)
    assert s.get("sec@v1#2").edges.depends_on == ("hw@v1#0",)
    assert s.get("sec@v1#2").edges.depended_by == ("guide@v1#0",)

    s.add_document("sec", doc_with(p2=PARAS[2].replace("5 minutes", "2 minutes")),
                   "2024-02-01", source_type="policy_doc", depends_on=["hw"])
    new = s.get("sec@v2#2")
    assert new.edges.depends_on == ("hw@v1#0",)
    assert new.edges.depended_by == ("guide@v1#0",)
    assert "sec@v2#2" in s.get("guide@v1#0").edges.depends_on
    assert s.pending_ripple == [s.row("sec@v2#2")]
    # queued, not yet sent
    assert not [e for e in s.history("guide@v1#0") if e.kind == "ripple"]

    t = to_ts("2024-02-02")
    rows = np.array([s.row("guide@v1#0"), s.row("hw@v1#0"), s.row("sec@v1#0")])
    before = s.confidence_at(rows, t)
    rep = s.consolidate(t)
    assert rep.ripples == 1 and rep.dependency_edges == 0 and rep.promoted == 1
    assert s.pending_ripple == []
    np.testing.assert_allclose(before - s.confidence_at(rows, t), [0.15, 0.0, 0.0], atol=1e-12)
    ev = [e for e in s.history("guide@v1#0") if e.kind == "ripple"]
    assert [(e.at, e.delta, e.detail) for e in ev] == [(t, -0.15, "from sec@v2#2 at depth 0")]
    # a later pass does not send it again
    assert s.consolidate("2024-02-03").ripples == 0


def test_adding_a_paragraph_reembeds_only_it(embedder):
    emb = CountingEmbedder(embedder)
    store = SmartVectorStore(emb)
    store.add_document("sec", DOC, "2024-01-01")
    emb.calls.clear()
    extra = "Printers must be collected from the tray within one hour."
    text = "\n\n".join(PARAS[:2] + [extra] + PARAS[2:])
    rep = store.add_document("sec", text, "2024-02-01")
    assert (rep.n_chunks, rep.n_reembedded, rep.kept) == (6, 1, 5)
    assert emb.calls == [[extra]]
    assert rep.added == ["sec@v2#2"] and rep.deprecated == []
    assert current_ids(store, "sec") == ["sec@v1#0", "sec@v1#1", "sec@v2#2", "sec@v1#2",
                                         "sec@v1#3", "sec@v1#4"]
    assert_offsets(store, "sec")
    assert store.pending_ripple == []  # an addition replaces nothing


def test_removing_a_paragraph_deprecates_its_vector(make_store):
    store = make_store()
    store.add_document("sec", DOC, "2024-01-01")
    rep = store.add_document("sec", doc_with(p3=""), "2024-02-01")
    assert (rep.n_chunks, rep.n_reembedded, rep.kept) == (4, 0, 4)
    assert rep.added == [] and rep.deprecated == ["sec@v1#3"]
    assert store.get("sec@v1#3", at="2024-02-01").status == Status.DEPRECATED
    assert_offsets(store, "sec")
    hits = store.query("Security incidents reported within hours", "2024-02-02", k=10)
    assert "sec@v1#3" not in {h.vector_id for h in hits}
    hits = store.query("Security incidents reported within hours", "2024-01-15", k=1)
    assert hits[0].vector_id == "sec@v1#3"


def test_unchanged_version_reembeds_nothing(embedder):
    emb = CountingEmbedder(embedder)
    store = SmartVectorStore(emb)
    store.add_document("sec", DOC, "2024-01-01")
    emb.calls.clear()
    rep = store.add_document("sec", DOC, "2024-02-01")
    assert (rep.n_reembedded, rep.kept, rep.added, rep.deprecated) == (0, 5, [], [])
    assert emb.n_texts == 0 and len(store) == 5


def test_update_earlier_than_last_version_raises_and_changes_nothing(make_store):
    store = make_store()
    store.add_document("sec", DOC, "2024-02-01")
    with pytest.raises(ValueError, match="earlier than its last version"):
        store.add_document("sec", doc_with(p0="Changed."), "2024-01-15")
    assert len(store) == 5 and store.docs["sec"].version == 1
    # the same time as the last version is fine
    rep = store.add_document("sec", doc_with(p0="Changed."), "2024-02-01")
    assert rep.n_reembedded == 1 and rep.deprecated == ["sec@v1#0"]


def test_document_validation(make_store):
    store = make_store()
    with pytest.raises(ValueError, match="no text"):
        store.add_document("e", "  \n\n  ", 0.0)
    with pytest.raises(ValueError, match="valid_to <= valid_from"):
        store.add_document("e", "Some text.", 0.0, valid_from=10.0, valid_to=10.0)
    store.add_document("e", "Some text.", 0.0, version=7)
    with pytest.raises(ValueError, match="exists already"):
        store.add_document("e", "Other text.", 1.0, version=7)
    assert len(store) == 1


# ============================================================================ lifecycle
def test_new_vectors_are_unconsolidated_until_consolidation(make_store):
    store = make_store()
    store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc")
    assert {store.get(f"sec@v1#{i}").status for i in range(5)} == {Status.UNCONSOLIDATED}
    hits = store.query("VPN hardware token", "2024-01-01T12:00", k=1)
    assert hits[0].status == Status.UNCONSOLIDATED  # immediately queryable
    rep = store.consolidate("2024-01-02")
    assert rep.promoted == 5 and rep.checked == 5
    assert store.get("sec@v1#0").status == Status.ACTIVE
    assert store.get("sec@v1#0", at="2024-01-01T23:59").status == Status.UNCONSOLIDATED
    assert [e.kind for e in store.history("sec@v1#0")][-1] == "promoted"
    assert store.consolidate("2024-01-03").promoted == 0


def test_decayed_active_vector_goes_dormant_and_stays_searchable(make_store):
    store = make_store(config=StoreConfig(record_access=False))
    store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc")
    store.consolidate("2024-01-01")
    t0 = to_ts("2024-01-01")
    # 0.9 * 2^(-60/30) = 0.225: still above 0.15
    assert store.consolidate(t0 + 60 * DAY).dormant == 0
    # 0.9 * 2^(-90/30) = 0.1125: below
    rep = store.consolidate(t0 + 90 * DAY)
    assert rep.dormant == 5
    v = store.get("sec@v1#1")
    assert v.status == Status.DORMANT
    assert v.confidence == pytest.approx(0.1125, abs=1e-12)
    assert store.get("sec@v1#1", at=t0 + 89 * DAY).status == Status.ACTIVE
    hits = store.query("VPN hardware token", t0 + 91 * DAY, k=5)
    assert hits[0].vector_id == "sec@v1#1" and hits[0].status == Status.DORMANT
    assert len(hits) == 5
    # forward only: feedback does not wake it up, a later pass does not repeat it
    store.feedback("sec@v1#1", True, t0 + 92 * DAY)
    assert store.consolidate(t0 + 93 * DAY).dormant == 0
    assert store.get("sec@v1#1").status == Status.DORMANT
    assert [e.kind for e in store.history("sec@v1#1")].count("dormant") == 1


def test_unconsolidated_vectors_do_not_go_dormant(make_store):
    store = make_store()
    store.add_document("sec", DOC, "2024-01-01", source_type="slack")
    rep = store.consolidate("2024-06-01")  # first pass long after: promote, not dormant
    assert rep.dormant == 0 and rep.promoted == 5
    assert store.consolidate("2024-06-02").dormant == 5


def test_superseded_vector_is_deprecated_then_archived_and_never_deleted(make_store):
    store = make_store()
    store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc")
    store.consolidate("2024-01-02")
    store.add_document("sec", doc_with(p0=PARAS[0].replace("90", "60")), "2024-02-01",
                       source_type="policy_doc")
    t_up = to_ts("2024-02-01")
    assert store.get("sec@v1#0", at=t_up - 1).status == Status.ACTIVE
    assert store.get("sec@v1#0", at=t_up).status == Status.DEPRECATED
    # 2024 is a leap year: Feb 1 + 30 days = Mar 2
    rep = store.consolidate("2024-03-01T23:59:59")
    assert rep.archived == 0 and rep.promoted == 1
    assert store.get("sec@v1#0").status == Status.DEPRECATED
    rep = store.consolidate("2024-03-02")
    assert rep.archived == 1
    assert store.get("sec@v1#0").status == Status.ARCHIVED
    assert store.get("sec@v1#0", at="2024-03-01").status == Status.DEPRECATED
    assert store.get("sec@v2#0").status == Status.ACTIVE
    assert store.consolidate("2024-04-01").archived == 0
    # nothing deleted
    assert len(store) == 6 and len(store.index) == 6
    old = store.get("sec@v1#0")
    assert old.content == PARAS[0]
    assert [e.kind for e in store.history("sec@v1#0")] == [
        "created", "promoted", "deprecated", "archived"]
    assert store.lineage("sec@v2#0") == ["sec@v1#0"]
    hits = store.query("Passwords rotated every days", "2024-04-02", k=10, lifecycle=False)
    statuses = {h.vector_id: h.status for h in hits}
    assert statuses["sec@v1#0"] == Status.ARCHIVED and statuses["sec@v2#0"] == Status.ACTIVE


# ========================================================================== time travel
@pytest.fixture
def versioned(make_store) -> SmartVectorStore:
    store = make_store()
    store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc")
    store.consolidate("2024-01-02")
    store.add_document("sec", doc_with(p0=PARAS[0].replace("90", "60")), "2024-06-01",
                       source_type="policy_doc")
    store.consolidate("2024-06-02")
    return store


Q = "How often must passwords be rotated?"


def test_query_before_a_document_exists_sees_nothing_of_it(versioned):
    assert versioned.query(Q, "2023-12-31", k=5) == []
    versioned.add_document("other", "Passwords must be rotated by admins.", "2024-03-01")
    hits = versioned.query(Q, "2024-02-01", k=10)
    assert hits and "other" not in {h.doc_id for h in hits}


def test_query_between_versions_returns_v1(versioned):
    hits = versioned.query(Q, "2024-03-01", k=10)
    ids = [h.vector_id for h in hits]
    assert ids[0] == "sec@v1#0" and "90 days" in hits[0].content
    assert "sec@v2#0" not in ids
    assert len(hits) == 5


def test_query_after_v2_returns_v2_and_lifecycle_false_lets_v1_compete(versioned):
    hits = versioned.query(Q, "2024-07-01", k=10)
    ids = [h.vector_id for h in hits]
    assert ids[0] == "sec@v2#0" and "60 days" in hits[0].content
    assert "sec@v1#0" not in ids and len(hits) == 5
    hits = versioned.query(Q, "2024-07-01", k=10, lifecycle=False)
    by_id = {h.vector_id: h for h in hits}
    assert set(by_id) == {"sec@v1#0", "sec@v2#0", "sec@v1#1", "sec@v1#2", "sec@v1#3",
                          "sec@v1#4"}
    assert by_id["sec@v1#0"].status == Status.DEPRECATED
    # v2 is fresher and as trusted: it still outranks v1 on the four signals
    assert by_id["sec@v2#0"].score > by_id["sec@v1#0"].score


def test_get_status_follows_the_reference_time(versioned):
    s = versioned
    assert s.get("sec@v1#0", at="2024-01-01").status == Status.UNCONSOLIDATED
    assert s.get("sec@v1#0", at="2024-03-01").status == Status.ACTIVE
    assert s.get("sec@v1#0", at="2024-06-01").status == Status.DEPRECATED
    assert s.get("sec@v1#0", at="2024-07-02").status == Status.DEPRECATED  # no pass yet
    s.consolidate("2024-07-02")
    assert s.get("sec@v1#0", at="2024-07-01").status == Status.DEPRECATED
    assert s.get("sec@v1#0", at="2024-07-02").status == Status.ARCHIVED
    assert s.get("sec@v2#0", at="2024-06-01").status == Status.UNCONSOLIDATED
    assert s.get("sec@v2#0", at="2024-06-02").status == Status.ACTIVE


def test_events_after_t_do_not_change_confidence_at_t(versioned):
    s = versioned
    # a dependent of v1#0, so a ripple can reach it
    T = to_ts("2024-03-01")
    s.add_document("note", "Note: rotation of passwords every 90 days is a hassle.", T - DAY,
                   source_type="email")
    rows = np.array([s.row("sec@v1#0"), s.row("note@v1#0"), s.row("sec@v1#1")])
    s.graph.link_dependency(rows[1], rows[0], T - DAY)
    before = s.confidence_at(rows, T).copy()
    snap = s.get("sec@v1#0", at=T)

    later = T + 10 * DAY
    s.feedback("sec@v1#0", False, later)
    s.feedback("sec@v1#1", True, later)
    s.query(Q, later, k=5)  # records accesses at `later`
    assert s.propagate(rows[0], later) == 1  # ripple onto note
    s.penalise(int(rows[2]), 0.2, later, "contradiction", "test")

    np.testing.assert_array_equal(s.confidence_at(rows, T), before)  # bitwise
    assert not np.any(s.confidence_at(rows, later) == s.confidence_at(rows, later - 1))
    snap2 = s.get("sec@v1#0", at=T)
    assert (snap2.confidence, snap2.access_count, snap2.negative_feedback) == (
        snap.confidence, snap.access_count, snap.negative_feedback)
    assert s.get("sec@v1#0", at=later).negative_feedback == 1
    # an event exactly at T counts at T
    s.feedback("sec@v1#1", True, T)
    assert s.confidence_at(rows[2:], T)[0] == pytest.approx(before[2] + 0.03, abs=1e-12)


def test_hits_carry_their_signals_and_score(versioned):
    s = versioned
    t = to_ts("2024-07-01")
    hits = s.query(Q, t, k=5, record_access=False)
    for h in hits:
        r = np.array([s.row(h.vector_id)])
        assert h.confidence == pytest.approx(float(s.confidence_at(r, t)[0]), abs=1e-15)
        assert h.score == pytest.approx(
            float(combine(ScoringWeights(), h.semantic, h.temporal, h.confidence,
                          h.relational)), abs=1e-12)
    top = hits[0]
    assert top.temporal == pytest.approx(2 ** (-30 / 30), abs=1e-12)  # 30 days after June 1
    assert top.relational == 0.0
    # the weights can be overridden per query
    sem = s.query(Q, t, k=5, weights=ScoringWeights(1, 0, 0, 0), record_access=False)
    assert all(h.score == pytest.approx(h.semantic, abs=1e-6) for h in sem)
    assert [h.semantic for h in sem] == sorted((h.semantic for h in sem), reverse=True)


def test_query_records_accesses_unless_disabled(make_store):
    s = make_store()
    s.add_document("sec", DOC, "2024-01-01")
    s.query(Q, "2024-01-02", k=2, record_access=False)
    assert s.get("sec@v1#0").access_count == 0
    s.query(Q, "2024-01-02", k=2)
    s.query(Q, "2024-01-03", k=2)
    v = s.get("sec@v1#0")
    assert v.access_count == 2 and v.last_accessed == to_ts("2024-01-03")
    assert s.get("sec@v1#0", at="2024-01-02").access_count == 1


# ========================================================================== bad numbers
@pytest.mark.parametrize("bad", [0.0, np.nan, np.inf])
def test_bad_embedding_raises_naming_the_vector_and_leaves_store_unchanged(embedder, bad):
    store = SmartVectorStore(PoisonEmbedder(embedder, bad))
    with pytest.raises(ValueError, match=r"'bad@v1#1'"):
        store.add_document("bad", "Fine text.\n\nPOISON text.", "2024-01-01")
    assert len(store) == 0 and len(store.index) == 0 and len(store.columns) == 0
    assert store.docs == {} and store.events == {}

    store.add_document("ok", DOC, "2024-01-01")
    with pytest.raises(ValueError, match=r"'ok@v2#2'"):
        store.add_document("ok", doc_with(p2="POISON paragraph."), "2024-02-01")
    assert len(store) == 5 and len(store.index) == 5 and len(store.columns) == 5
    assert store.docs["ok"].version == 1 and store.docs["ok"].text == DOC
    assert store.pending_ripple == []
    assert store.get("ok@v1#2", at="2024-03-01").status == Status.UNCONSOLIDATED
    assert [e.kind for e in store.history("ok@v1#2")] == ["created"]
    # and the store still works
    rep = store.add_document("ok", doc_with(p2="A fine paragraph."), "2024-02-01")
    assert rep.added == ["ok@v2#2"]
    assert store.query("A fine paragraph.", "2024-02-02", k=1)[0].vector_id == "ok@v2#2"


class WrongShapeEmbedder:
    """Returns rows of the wrong width for texts containing WIDE."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim

    def encode(self, texts):
        if any("WIDE" in t for t in texts):
            return np.ones((len(texts), self.dim + 1), dtype=np.float32)
        return self.inner.encode(texts)


def test_wrong_shape_embedding_raises_and_leaves_store_unchanged(embedder):
    store = SmartVectorStore(WrongShapeEmbedder(embedder))
    store.add_document("a", "First document text.", "2024-01-01")
    with pytest.raises(ValueError, match="shape"):
        store.add_document("b", "A WIDE text.", "2024-01-01")
    assert len(store) == 1 and len(store.columns) == 1 and len(store.index) == 1
    store.add_document("c", "Another document entirely.", "2024-01-02")
    hits = store.query("Another document entirely.", "2024-01-03", k=2)
    assert [h.vector_id for h in hits][0] == "c@v1#0"
    assert store.get("c@v1#0").content == "Another document entirely."


def test_duplicate_texts_in_two_docs_are_both_stored(make_store):
    store = make_store()
    store.add_document("a", "Same words in both.", "2024-01-01")
    store.add_document("b", "Same words in both.", "2024-01-01")  # identical timestamp too
    assert len(store) == 2
    hits = store.query("Same words in both.", "2024-01-01", k=5)
    assert [h.vector_id for h in hits] == ["a@v1#0", "b@v1#0"]
    assert hits[0].score == hits[1].score
    assert hits[0].semantic == pytest.approx(1.0, abs=1e-6)


def test_query_edge_cases(make_store):
    store = make_store()
    assert store.query("anything", "2024-01-01") == []
    with pytest.raises(ValueError, match="empty query"):
        store.query("", "2024-01-01")
    with pytest.raises(ValueError, match="empty query"):
        store.query("  \n ", "2024-01-01")
    store.add_document("a", DOC, "2024-01-01")
    with pytest.raises(ValueError, match="k must be"):
        store.query("anything", "2024-01-01", k=0)
    assert len(store.query("passwords", "2024-01-01", k=3)) == 3
    assert len(store.query("passwords", "2024-01-01", k=50)) == 5
    with pytest.raises(KeyError, match="unknown vector id"):
        store.get("nope")


def test_times_may_be_datetimes_strings_or_numbers(make_store):
    from datetime import UTC, datetime

    store = make_store()
    store.add_document("a", "Text one.", datetime(2024, 1, 1, tzinfo=UTC))
    store.add_document("b", "Text two.", "2024-01-01T00:00:00Z")
    store.add_document("c", "Text three.", to_ts("2024-01-01"))
    assert {store.get(v).created_at for v in ("a@v1#0", "b@v1#0", "c@v1#0")} == {
        to_ts("2024-01-01")}


# ========================================================================== persistence
def build_rich_store(store: SmartVectorStore) -> SmartVectorStore:
    store.add_document("hw", HW, "2024-01-01", source_type="official_db")
    store.add_document("sec", DOC, "2024-01-01", source_type="policy_doc", depends_on=["hw"],
                       meta={"team": "security"})
    store.add_document("guide", GUIDE, "2024-01-05", source_type="wiki", depends_on=["sec"])
    store.add_document("rumour", PARAS[0].replace("90", "30"), "2024-01-10", source_type="slack")
    store.consolidate("2024-01-11")
    store.query(Q, "2024-01-12", k=3)
    store.feedback("sec@v1#0", True, "2024-01-13")
    store.feedback("guide@v1#0", False, "2024-01-14")
    store.add_document("sec", doc_with(p2=PARAS[2].replace("5 minutes", "2 minutes")),
                       "2024-02-01", source_type="policy_doc", depends_on=["hw"])
    store.add_document("sec", doc_with(p2=PARAS[2].replace("5 minutes", "2 minutes"),
                                       p0=PARAS[0].replace("90", "60")),
                       "2024-03-15", source_type="policy_doc", depends_on=["hw"])
    store.consolidate("2024-03-01")
    return store  # a ripple (sec@v3#0) is still pending


QUERIES = [(Q, "2024-01-20"), (Q, "2024-04-01"), ("laptop screen lock encryption", "2024-02-15"),
           ("visitor badge", "2024-05-01"), ("hardware tokens", "2024-01-02")]


def snapshot(store: SmartVectorStore) -> dict:
    out = {}
    for vid in store.ids:
        for at in (None, "2024-01-06", "2024-02-20", "2024-06-01"):
            v = store.get(vid, at=at)
            d = {k: getattr(v, k) for k in v.__dataclass_fields__ if k != "embedding"}
            d["embedding"] = v.embedding.tobytes()
            out[(vid, at)] = d
        out[(vid, "history")] = store.history(vid)
        out[(vid, "lineage")] = store.lineage(vid)
    return out


def all_queries(store: SmartVectorStore) -> list:
    return [store.query(q, at, k=4, record_access=False) for q, at in QUERIES] + [
        store.query(q, at, k=6, lifecycle=False, record_access=False) for q, at in QUERIES]


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_save_load_round_trip_is_exact(make_store, embedder, tmp_path, index):
    cfg = StoreConfig(consolidation=ConsolidationParams(dependency_similarity=-1.0))
    store = build_rich_store(make_store(index, cfg))
    assert store.pending_ripple  # something left for the loaded store to do
    path = store.save(tmp_path / "sub" / "store.npz")
    assert path == tmp_path / "sub" / "store.npz" and path.is_file()
    loaded = SmartVectorStore.load(path, HashingEmbedder(dim=256))
    assert type(loaded.index) is type(store.index)
    assert loaded.config == store.config
    assert len(loaded) == len(store) and loaded.ids == store.ids
    assert all_queries(loaded) == all_queries(store)  # Hit equality: scores bitwise
    assert snapshot(loaded) == snapshot(store)
    assert loaded.pending_ripple == store.pending_ripple
    # both keep working identically
    for s in (store, loaded):
        s.add_document("guide", GUIDE + " Ask IT for help.", "2024-04-01", source_type="wiki",
                       depends_on=["sec"])
        s.consolidate("2024-04-02")
        s.query(Q, "2024-04-03", k=3)
    assert all_queries(loaded) == all_queries(store)
    assert snapshot(loaded) == snapshot(store)


def test_interrupted_savez_leaves_previous_file_intact(make_store, tmp_path, monkeypatch):
    store = make_store()
    store.add_document("a", DOC, "2024-01-01")
    path = store.save(tmp_path / "store.npz")
    original = path.read_bytes()
    store.add_document("b", "A second document.", "2024-01-02")

    real = np.savez

    def broken(file, *args, **arrays):
        if "state" in arrays:  # the store's own write, not the index's
            file.write(b"half a file")
            raise OSError("disk full")
        return real(file, *args, **arrays)

    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(OSError, match="disk full"):
        store.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.npz"]
    assert len(SmartVectorStore.load(path, store.embedder)) == 5


def test_interrupted_rename_leaves_previous_file_intact(make_store, tmp_path, monkeypatch):
    store = make_store("hnsw")
    store.add_document("a", DOC, "2024-01-01")
    path = store.save(tmp_path / "store.npz")
    original = path.read_bytes()
    store.add_document("b", "A second document.", "2024-01-02")
    real = os.replace

    def broken(src, dst, *a, **kw):
        if Path(dst) == path:
            raise OSError("power cut")
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="power cut"):
        store.save(path)
    monkeypatch.undo()
    assert path.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.npz"]
    loaded = SmartVectorStore.load(path, store.embedder)
    assert len(loaded) == 5 and isinstance(loaded.index, type(store.index))
    # a save that is not interrupted replaces it
    store.save(path)
    assert len(SmartVectorStore.load(path, store.embedder)) == 6


def test_load_with_another_embedder_raises(make_store, tmp_path):
    store = make_store()
    store.add_document("a", DOC, "2024-01-01")
    path = store.save(tmp_path / "s.npz")
    with pytest.raises(ValueError, match="embedder 'hashing-256-s0'"):
        SmartVectorStore.load(path, HashingEmbedder(dim=256, seed=1))


def test_update_without_source_keeps_the_documents_source(make_store) -> None:
    store = make_store()
    text = "Title\n\nScope: everyone.\n\nThe limit is {} items."
    store.add_document("d", text.format(5), at=0.0, source_type="policy_doc")
    rep = store.add_document("d", text.format(7), at=100.0)
    new = store.get(rep.added[0])
    assert new.source.type == "policy_doc"
    assert new.source.authority == pytest.approx(0.90)
    rep = store.add_document("d", text.format(9), at=200.0, source_type="slack")
    assert store.get(rep.added[0]).source.authority == pytest.approx(0.30)


def test_first_fetch_divides_by_the_visible_share_with_a_margin():
    from smartvector.query import first_fetch

    assert first_fetch(50, 1.0, 64, 10_000) == 64  # at least ef_search
    assert first_fetch(100, 1.0, 64, 10_000) == 100  # everything visible: no margin
    assert first_fetch(50, 0.5, 64, 10_000) == 126  # 50 x 1.25 / 0.5 + 1
    assert first_fetch(50, 0.001, 0, 10_000) == 4001  # the share counts as at least 1/64
    assert first_fetch(50, 0.5, 64, 90) == 90  # never more than the index holds
